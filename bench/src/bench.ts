import { execFileSync } from 'node:child_process';
import os from 'node:os';
import pg from 'pg';
import { Cleanup } from './cleanup.ts';
import { type LoadShape, percentile, runLoad } from './http-load.ts';
import { measureMailDrain } from './mail-drain.ts';
import { meter } from './meter.ts';
import { type OtlpSink, startOtlpSink } from './otlp-sink.ts';
import { cpuModel } from './proc-stats.ts';
import { type Pinning, pinLoadGenerator } from './processes.ts';
import type { BenchReport, MailerStart, Row, TargetReport } from './report.ts';
import { checkOut, describeRevision } from './revision.ts';
import { HTTP_SCENARIOS, type HttpScenario, type ScenarioName } from './scenarios.ts';
import { SERVICE_NAMES, startTarget, type Target, WORKING_TREE } from './target.ts';

export interface BenchOptions {
  /** Seconds each HTTP flow is measured for. */
  duration: number;
  connections: number;
  /** Services on core 0, the load generator on core 1 (with taskset and two cores or more). */
  pin: boolean;
  /** A git revision to measure too, in a temporary worktree, after the working tree. */
  compare?: string;
  /** Emails queued at once for the mailer drain. */
  emails: number;
  /** Emails sent one at a time for the mailer's idle latency. */
  idleSamples: number;
  /** LOG_LEVEL of the gateway and the mailer. */
  logLevel: string;
  /** A Postgres URL to administer from: the bench creates its database beside it and drops it after. */
  adminUrl: string;
  /** Only these flows (all when absent). */
  only?: readonly ScenarioName[];
  /** Runs of each flow per revision; the report keeps the one with the median total CPU. */
  rounds: number;
  /** Both services export every span to an OTLP/HTTP receiver in the bench process. */
  exportTraces?: boolean;
}

export const DEFAULTS = {
  duration: 10,
  connections: 32,
  pin: false,
  rounds: 1,
  logLevel: 'info',
  adminUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
} satisfies Partial<BenchOptions>;

/**
 * Emails the drain queues and idle samples it takes: scaled with the duration, like the HTTP flows, so
 * that a mailer at its target rate (1,000 emails/s) drains for about the duration. A much shorter
 * drain measures mostly a process just started: its code not yet optimized, its SMTP connections
 * opening.
 */
export const mailShape = (duration: number) => ({
  emails: Math.max(50, Math.round(1000 * duration)),
  idleSamples: Math.max(10, Math.min(100, Math.round(10 * duration))),
});

/** Where the services' spans went: nowhere, or to the bench's OTLP sink (what had arrived by the end). */
function tracing(otlp: OtlpSink | undefined): string {
  if (!otlp) return 'Traces: no OTLP exporter configured, as by default.';
  const received = [...otlp.received].map(
    ([service, bytes]) => `${(bytes / 1e6).toFixed(1)} MB from ${service}`,
  );
  return `Traces (--export-traces): every span exported over OTLP/HTTP to a receiver in the bench process that answers at once and keeps nothing; it had received ${received.join(', ') || 'nothing'} by the end of the run.`;
}

const NOTES = [
  'The gateway and the mailer run as in production (`node --import ./packages/telemetry/src/register.ts …`, JSON logs) but with APP_ENV=test, so the send answer carries the code: verify requests use it instead of reading the email.',
  'Sign-in limits lifted by configuration only: OTP_RESEND_COOLDOWN=0, OTP_MAX_SENDS_PER_EMAIL_PER_HOUR, OTP_MAX_SENDS_PER_IP_PER_HOUR, OTP_MAX_FAILURES_PER_EMAIL_PER_DAY, OTP_MAX_FAILURES_PER_IP_PER_HOUR and RATE_LIMIT_MAX = 1,000,000,000.',
  'Flows that use something up (a code, a session) make one request per prepared item, as many as a pilot run says fit in the duration; the others run for the duration after a warm-up. Preparing (codes, sign-ins) is not measured.',
  'No mailer runs during the HTTP flows (the emails queued then are dropped before the drain). The drain runs the mailer at its default settings into an SMTP sink in the bench process; its emails are queued by the gateway (send code), while the queue is paused for the throughput, and its latency is from the send request to the SMTP acceptance.',
];

function redisVersion(): string {
  try {
    const out = execFileSync('redis-server', ['--version'], { encoding: 'utf8' });
    return /v=(\S+)/.exec(out)?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Postgres's version, and whether autovacuum runs: off, the table holds no vacuuming's cost. */
async function postgresVersion(adminUrl: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ version: string; autovacuum: string }>(
      "select split_part(current_setting('server_version'), ' ', 1) as version, current_setting('autovacuum') as autovacuum",
    );
    const [settings] = rows;
    return settings ? `${settings.version} (autovacuum ${settings.autovacuum})` : 'unknown';
  } finally {
    await admin.end();
  }
}

/** A warm-up for flows that run for a duration: a fifth of it, at most 2 s. */
const warmUpSeconds = (duration: number) => Math.min(2, duration / 5);

async function measureHttp(
  target: Target,
  scenario: HttpScenario,
  options: BenchOptions,
  notes: string[],
): Promise<Row> {
  const { connections, duration } = options;
  const { population, baseUrl } = target;
  const noteFailures = (what: string, failures: Record<string, number>) => {
    const entries = Object.entries(failures);
    if (entries.length > 0)
      notes.push(
        `${target.label}, ${scenario.title}, ${what}: ${entries.map(([k, n]) => `${k}×${n}`).join(', ')}.`,
      );
  };

  let shape: LoadShape = { connections, duration };
  if (scenario.consumes) {
    // The pilot warms the gateway up and tells how many requests fill the duration.
    const pilotAmount = Math.max(16, connections * 8);
    const pilot = await runLoad(baseUrl, await scenario.prepare(population, pilotAmount, connections), {
      connections,
      amount: pilotAmount,
    });
    noteFailures('pilot run', pilot.failures);
    shape = {
      connections,
      amount: Math.max(connections * 2, Math.round((pilot.responses / pilot.seconds) * duration)),
    };
  }
  const feed = await scenario.prepare(population, shape.amount ?? 0, connections);
  if (!scenario.consumes) {
    const warmUp = await runLoad(baseUrl, feed, { connections, duration: warmUpSeconds(duration) });
    noteFailures('warm-up', warmUp.failures);
  }

  const { result, usage } = await meter(target.metered(), () => runLoad(baseUrl, feed, shape));
  const perRequest = (ms: number) => ms / result.responses;
  return {
    name: scenario.name,
    title: scenario.title,
    ops: result.ok,
    failures: result.failures,
    seconds: result.seconds,
    rate: result.responses / result.seconds,
    p50: percentile(result.latencies, 0.5),
    p99: percentile(result.latencies, 0.99),
    cpuMsPerOp: {
      service: perRequest(usage.cpuMs.service),
      postgres: usage.cpuMs.postgres === undefined ? undefined : perRequest(usage.cpuMs.postgres),
      redis: perRequest(usage.cpuMs.redis),
    },
    memoryPeak: usage.memoryPeak,
    loadGeneratorBusy: usage.loadGeneratorBusy,
  };
}

/** The run of a flow with the median total CPU per request (or email): one real run, not a mix. */
function medianRun(runs: readonly Row[]): Row {
  const total = (row: Row) => row.cpuMsPerOp.service + (row.cpuMsPerOp.postgres ?? 0) + row.cpuMsPerOp.redis;
  const sorted = [...runs].sort((a, b) => total(a) - total(b));
  return sorted[Math.floor((sorted.length - 1) / 2)] as Row;
}

/**
 * Measures every revision flow by flow: each flow runs on one revision right after the other
 * (`rounds` times, which goes first alternating: A B, B A, …), so the machine's drift falls on both
 * alike. Each revision's stack is started first and stays up, idle, while the other is measured.
 */
async function measureRevisions(
  revisions: readonly { label: string; root: string }[],
  options: BenchOptions,
  pinning: Pinning | undefined,
  otlpEndpoint: string | undefined,
  cleanup: Cleanup,
  progress: (line: string) => void,
  notes: string[],
): Promise<TargetReport[]> {
  const stacks: { target: Target; runs: Map<ScenarioName, Row[]>; mailerStart: Map<Row, MailerStart> }[] = [];
  for (const { label, root } of revisions) {
    const own = new Cleanup();
    cleanup.add(`stop what ${label} started`, () => own.run());
    progress(`${label}: starting redis-server, a database and the gateway`);
    const target = await startTarget({
      label,
      root,
      adminUrl: options.adminUrl,
      pinning,
      logLevel: options.logLevel,
      parallel: Math.max(8, options.connections),
      ...(otlpEndpoint && { otlpEndpoint }),
      cleanup: own,
    });
    stacks.push({ target, runs: new Map(), mailerStart: new Map() });
  }
  const inTurn = async (measure: (stack: (typeof stacks)[number]) => Promise<Row>, what: string) => {
    for (let n = 1; n <= options.rounds; n++) {
      const order = n % 2 === 1 ? stacks : [...stacks].reverse();
      for (const stack of order) {
        const round = options.rounds > 1 ? `, round ${n} of ${options.rounds}` : '';
        progress(`${stack.target.label}: ${what}${round}`);
        const row = await measure(stack);
        stack.runs.set(row.name, [...(stack.runs.get(row.name) ?? []), row]);
      }
    }
  };

  for (const scenario of HTTP_SCENARIOS.filter((s) => !options.only || options.only.includes(s.name)))
    await inTurn((stack) => measureHttp(stack.target, scenario, options, notes), scenario.title);
  if (!options.only || options.only.includes('mail-drain'))
    await inTurn(async (stack) => {
      const drain = await measureMailDrain(stack.target, {
        emails: options.emails,
        idleSamples: options.idleSamples,
      });
      stack.mailerStart.set(drain.row, { memoryIdle: drain.memoryIdle, firstEmailMs: drain.firstEmailMs });
      return drain.row;
    }, `mailer drain (${options.idleSamples} emails one by one, then ${options.emails} at once)`);

  const reports: TargetReport[] = [];
  for (const { target, runs, mailerStart } of stacks) {
    const { label } = target;
    const rows = [...runs.values()].map(medianRun);
    if (pinning && !target.postgresPinned())
      notes.push(`${label}: the Postgres backends could not all be pinned to core ${pinning.services}.`);
    for (const row of rows)
      if (row.loadGeneratorBusy > 0.9)
        notes.push(
          `${label}, ${row.title}: the load generator used ${Math.round(row.loadGeneratorBusy * 100)} % of a core; it may have limited the rate.`,
        );
    const drain = rows.find((row) => mailerStart.has(row));
    reports.push({
      label,
      revision: await describeRevision(target.root),
      rows,
      gatewayMemoryIdle: target.memoryIdle,
      gatewayMemoryPeak: target.memoryPeak(),
      mailer: drain && mailerStart.get(drain),
    });
  }
  return reports;
}

/** Measures the working tree (and the `compare` revision), undoing everything it set up through `cleanup`. */
export async function runBench(
  options: BenchOptions,
  cleanup: Cleanup,
  progress: (line: string) => void = () => {},
): Promise<BenchReport> {
  const cores = os.availableParallelism();
  // Other work on the machine shows in every number: said in the report.
  const loadBefore = os.loadavg()[0] ?? 0;
  const pinning = options.pin ? pinLoadGenerator(cores) : undefined;
  const otlp = options.exportTraces ? await startOtlpSink(Object.values(SERVICE_NAMES)) : undefined;
  if (otlp) cleanup.add('close the OTLP sink', () => otlp.close());
  const notes = [...NOTES];
  if (options.pin && !pinning)
    notes.push('--pin was asked for but not applied (needs taskset and two cores): nothing is pinned.');

  const revisions = [{ label: 'working tree', root: WORKING_TREE }];
  if (options.compare)
    revisions.push({
      label: options.compare,
      root: await checkOut(WORKING_TREE, options.compare, cleanup, progress),
    });

  const targets = await measureRevisions(
    revisions,
    options,
    pinning,
    otlp?.endpoint,
    cleanup,
    progress,
    notes,
  );
  notes.splice(1, 0, tracing(otlp));
  if (options.rounds > 1)
    notes.push(
      `Each flow ran ${options.rounds} times per revision, alternating which went first; each row is the run with the median total CPU per request.`,
    );

  const machine =
    `${cores} cores (${cpuModel()}), Node ${process.version}, Postgres ${await postgresVersion(options.adminUrl)}, ` +
    `Redis ${redisVersion()}; ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ` +
    `load average ${loadBefore.toFixed(2)} before the run.`;
  const settings =
    `${options.duration} s per HTTP flow, ${options.connections} connections, LOG_LEVEL=${options.logLevel}; ` +
    (pinning
      ? `pinned: gateway, mailer, redis-server and the bench database's Postgres backends on core ${pinning.services}, the load generator on core ${pinning.loadGenerator}.`
      : 'not pinned.');
  return { machine, settings, notes, targets, ...(otlp && { tracesReceived: new Map(otlp.received) }) };
}
