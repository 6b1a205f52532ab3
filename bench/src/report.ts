import type { Memory } from './proc-stats.ts';
import type { ScenarioName } from './scenarios.ts';

/** One line of the table: a scenario measured against one revision. */
export interface Row {
  name: ScenarioName;
  title: string;
  /** Successful ops: 2xx answers, or emails delivered. */
  ops: number;
  /** Non-2xx answers by status, connection errors and timeouts, or emails not delivered. */
  failures: Record<string, number>;
  seconds: number;
  /** Answers (any status) per second, or emails delivered per second. */
  rate: number;
  /** Latency of the 2xx answers, ms; for the mail drain, send-code request → SMTP accepted with the mailer idle. */
  p50: number;
  p99: number;
  /** CPU ms per answer (per email delivered) of the service (gateway, or mailer), the Postgres backends and Redis. */
  cpuMsPerOp: { service: number; postgres: number | undefined; redis: number };
  /** Highest memory of the service during the run. */
  memoryPeak: Memory;
  /** Share of a core the load generator used; near 1 it may have limited the rate. */
  loadGeneratorBusy: number;
}

export interface TargetReport {
  label: string;
  revision: string;
  rows: Row[];
  gatewayMemoryIdle: Memory;
  gatewayMemoryPeak: Memory;
  /** When the mailer drain ran. */
  mailer: MailerStart | undefined;
}

/** The mailer once started: its memory before any email, and send → accepted of its first email (ms). */
export interface MailerStart {
  memoryIdle: Memory;
  firstEmailMs: number;
}

export interface BenchReport {
  machine: string;
  settings: string;
  notes: string[];
  targets: TargetReport[];
  /** With --export-traces: bytes of OTLP received, by service name. */
  tracesReceived?: Map<string, number>;
}

/** Issue 13's targets, beside what is measured. */
const TARGETS: Partial<Record<ScenarioName, string>> = {
  send: '≤ 0.4',
  'verify-new': '≤ 0.85',
  'verify-returning': '≤ 0.6',
  refresh: '≤ 0.6',
  'list-sessions': '≤ 0.33',
  'mail-drain': '≥ 1,000/s, p99 ≤ 100 ms, ≤ 120 MB',
};

const failed = (row: Row) => Object.values(row.failures).reduce((sum, count) => sum + count, 0);
const cpuTotal = (row: Row) => row.cpuMsPerOp.service + (row.cpuMsPerOp.postgres ?? 0) + row.cpuMsPerOp.redis;
const mb = (bytes: number) => `${Math.round(bytes / 1024 / 1024)}`;
/** RSS, then its anonymous part in parentheses, MB. */
const mbs = ({ rss, anonymous }: Memory) => `${mb(rss)} (${mb(anonymous)})`;
const ms = (value: number) =>
  Number.isNaN(value)
    ? '—'
    : value < 10
      ? value.toFixed(2)
      : value < 100
        ? value.toFixed(1)
        : value.toFixed(0);
const cpu = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? 'n/a' : value.toFixed(2);
const count = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '—');

function failedCell(row: Row): string {
  const total = failed(row);
  if (total === 0) return '0';
  const detail = Object.entries(row.failures)
    .map(([what, n]) => `${what}×${n}`)
    .join(', ');
  return `**${total}** (${detail})`;
}

/** The Markdown table of one revision, with the memory line under it. */
function targetTable(target: TargetReport): string {
  const lines = [
    '| flow | requests | req/s | p50 ms | p99 ms | failed | CPU ms/req: gateway | Postgres | Redis | total | target | RSS peak MB (anonymous) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of target.rows) {
    const flag = failed(row) > 0 ? ' ⚠' : '';
    const drain = row.name === 'mail-drain';
    lines.push(
      `| ${row.title}${flag} | ${count(row.ops + failed(row))} | ${count(row.rate)} | ${ms(row.p50)} | ${ms(row.p99)} | ` +
        `${failedCell(row)} | ${cpu(row.cpuMsPerOp.service)}${drain ? ' (mailer)' : ''} | ` +
        `${drain ? '—' : cpu(row.cpuMsPerOp.postgres)} | ${cpu(row.cpuMsPerOp.redis)} | ${cpu(cpuTotal(row))} | ` +
        `${TARGETS[row.name] ?? '—'} | ${mbs(row.memoryPeak)} |`,
    );
  }
  const mailer =
    target.mailer === undefined
      ? ''
      : `; mailer ${mbs(target.mailer.memoryIdle)} MB at rest (target ≤ 120 MB), its first email after start ` +
        `${ms(target.mailer.firstEmailMs)} ms (send request → SMTP accepted; not in the drain's p50 and p99)`;
  lines.push(
    '',
    `Gateway RSS (anonymous) ${mbs(target.gatewayMemoryIdle)} MB at rest (target ≤ 90 MB), ` +
      `${mbs(target.gatewayMemoryPeak)} MB at most over the whole run (target ≤ 150 MB)${mailer}.`,
  );
  return lines.join('\n');
}

const ratio = (value: number, base: number) =>
  base > 0 && value > 0 && Number.isFinite(value / base) ? `×${(value / base).toFixed(2)}` : '—';

/** Each measure of `current` divided by the same measure of `base`. */
function ratioTable(current: TargetReport, base: TargetReport): string {
  const lines = [
    `Ratios, ${current.label} ÷ ${base.label} (req/s: above 1 is faster; the others: below 1 is cheaper):`,
    '',
    '| flow | req/s | p99 | CPU ms/req: gateway | Postgres | Redis | total | RSS peak |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of current.rows) {
    const other = base.rows.find((candidate) => candidate.name === row.name);
    if (!other) continue;
    lines.push(
      `| ${row.title} | ${ratio(row.rate, other.rate)} | ${ratio(row.p99, other.p99)} | ` +
        `${ratio(row.cpuMsPerOp.service, other.cpuMsPerOp.service)} | ` +
        `${ratio(row.cpuMsPerOp.postgres ?? 0, other.cpuMsPerOp.postgres ?? 0)} | ` +
        `${ratio(row.cpuMsPerOp.redis, other.cpuMsPerOp.redis)} | ${ratio(cpuTotal(row), cpuTotal(other))} | ` +
        `${ratio(row.memoryPeak.rss, other.memoryPeak.rss)} |`,
    );
  }
  lines.push(
    '',
    `Gateway RSS at rest ${ratio(current.gatewayMemoryIdle.rss, base.gatewayMemoryIdle.rss)}, ` +
      `at most ${ratio(current.gatewayMemoryPeak.rss, base.gatewayMemoryPeak.rss)}; its anonymous memory at rest ` +
      `${ratio(current.gatewayMemoryIdle.anonymous, base.gatewayMemoryIdle.anonymous)}, ` +
      `at most ${ratio(current.gatewayMemoryPeak.anonymous, base.gatewayMemoryPeak.anonymous)}.`,
  );
  return lines.join('\n');
}

const LEGEND = [
  'requests, req/s: answers (any status), and answers per second; for the mailer drain, emails queued while the',
  'queue was paused, and emails accepted by the SMTP sink per second once it was resumed. p50/p99: latency of the',
  'successful answers; for the mailer drain, send-code request → SMTP accepted, one email at a time with the mailer',
  'idle, after its first email (told apart below the table: it opens the SMTP connection). failed: non-2xx',
  'answers, connection errors and timeouts (emails not delivered); a row with any is flagged ⚠. CPU ms/req: user +',
  'system time from /proc/<pid>/stat over the run, divided by the requests (emails): gateway (the mailer for the',
  "drain), Postgres = the backends serving the bench database (pg_stat_activity; not the server's shared",
  "background processes), Redis = the bench's own redis-server. target: the total CPU ms/req Tessera aims for.",
  'RSS peak: highest RSS of the gateway (mailer) during that row, sampled every 100 ms; in parentheses the highest of',
  "its anonymous part (RSS less the pages mapped from files, mostly the node binary's code that every Node process",
  'on the host shares): what the process alone holds.',
].join('\n');

/** Everything `pnpm bench` prints on stdout: Markdown, ready for the README. */
export function renderReport(report: BenchReport): string {
  const parts = [`${report.machine}\n${report.settings}`];
  for (const target of report.targets) {
    if (report.targets.length > 1) parts.push(`**${target.label}** (${target.revision})`);
    else parts.push(`Revision: ${target.revision}`);
    parts.push(targetTable(target));
  }
  const [current, base] = report.targets;
  if (current && base) parts.push(ratioTable(current, base));
  parts.push(LEGEND);
  if (report.notes.length > 0) parts.push(report.notes.map((note) => `- ${note}`).join('\n'));
  return `${parts.join('\n\n')}\n`;
}

/** Rows whose runs failed, or produced no successful op. */
export function unhealthyRows(report: BenchReport): string[] {
  return report.targets.flatMap((target) =>
    target.rows
      .filter((row) => failed(row) > 0 || row.ops === 0)
      .map((row) => `${target.label}: ${row.title}`),
  );
}
