import { parseArgs } from 'node:util';
import { type BenchOptions, DEFAULTS, mailShape, runBench } from './bench.ts';
import { Cleanup } from './cleanup.ts';
import { renderReport, unhealthyRows } from './report.ts';
import { SCENARIO_NAMES, type ScenarioName } from './scenarios.ts';

const HELP = `pnpm bench [options]

Runs the gateway and the mailer of this working tree as child processes against a database of its
own on Postgres and a redis-server of its own, measures each flow with autocannon, and prints a
Markdown table on stdout (progress on stderr).

  --duration <s>       seconds per HTTP flow (default ${DEFAULTS.duration})
  --connections <n>    concurrent connections (default ${DEFAULTS.connections})
  --pin                gateway, mailer, redis-server and the Postgres backends on core 0 (each
                       backend once a look every 500 ms finds it), the load generator on core 1
                       (taskset, two cores or more)
  --compare <rev>      also measure this git revision (a temporary worktree, pnpm install
                       --frozen-lockfile there), then print the ratios; the revision must contain
                       this bench's counterparts (same API, infra/src/migrate.ts, the email contract);
                       each flow runs on one revision right after the other
  --rounds <n>         runs of each flow per revision, which goes first alternating (A B, B A, …);
                       each row is the run with the median total CPU, the lower middle one of an
                       even number (default ${DEFAULTS.rounds}); with --compare use an even number,
                       so that each revision goes first as often
  --emails <n>         emails queued at once for the mailer drain (default 1,000 × duration)
  --only <flows>       comma-separated: ${SCENARIO_NAMES.join(', ')}
  --log-level <level>  LOG_LEVEL of gateway and mailer (default ${DEFAULTS.logLevel})
  --export-traces      gateway and mailer export every span (OTLP/HTTP) to a receiver in the bench
                       process that keeps nothing: what tracing costs
  --database-url <url> Postgres to administer from (default BENCH_DATABASE_URL or
                       ${DEFAULTS.adminUrl}); the bench creates and drops tessera_bench_* there`;

function parse(argv: string[]): BenchOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' },
      connections: { type: 'string' },
      pin: { type: 'boolean', default: false },
      compare: { type: 'string' },
      rounds: { type: 'string' },
      emails: { type: 'string' },
      only: { type: 'string' },
      'log-level': { type: 'string' },
      'export-traces': { type: 'boolean', default: false },
      'database-url': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return undefined;
  const positive = (name: string, value: string | undefined, fallback: number) => {
    const number = value === undefined ? fallback : Number(value);
    if (!(number > 0)) throw new Error(`--${name} takes a positive number, not ${value}`);
    return number;
  };
  const duration = positive('duration', values.duration, DEFAULTS.duration);
  const only = values.only?.split(',').map((name) => name.trim()) as ScenarioName[] | undefined;
  const unknown = only?.filter((name) => !SCENARIO_NAMES.includes(name));
  if (unknown?.length) throw new Error(`--only: unknown flows ${unknown.join(', ')}`);
  const shape = mailShape(duration);
  return {
    duration,
    connections: Math.round(positive('connections', values.connections, DEFAULTS.connections)),
    pin: values.pin,
    ...(values.compare !== undefined && { compare: values.compare }),
    rounds: Math.round(positive('rounds', values.rounds, DEFAULTS.rounds)),
    emails: Math.round(positive('emails', values.emails, shape.emails)),
    idleSamples: shape.idleSamples,
    logLevel: values['log-level'] ?? DEFAULTS.logLevel,
    exportTraces: values['export-traces'],
    adminUrl: values['database-url'] ?? process.env.BENCH_DATABASE_URL ?? DEFAULTS.adminUrl,
    ...(only && { only }),
  };
}

let options: BenchOptions | undefined;
try {
  options = parse(process.argv.slice(2));
} catch (error) {
  console.error(`${error instanceof Error ? error.message : error}\n\n${HELP}`);
  process.exit(2);
}
if (!options) {
  console.log(HELP);
  process.exit(0);
}

const cleanup = new Cleanup();
// Every signal is taken, the second Ctrl-C too: cleaning up is what ends the run (it drops databases).
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    console.error(`bench: ${signal}, cleaning up`);
    void cleanup.run().finally(() => process.exit(130));
  });

try {
  const report = await runBench(options, cleanup, (line) => console.error(`bench: ${line}`));
  process.stdout.write(renderReport(report));
  const unhealthy = unhealthyRows(report);
  if (unhealthy.length > 0) {
    console.error(`bench: failed requests or no successful one in: ${unhealthy.join('; ')}`);
    process.exitCode = 1;
  }
} catch (error) {
  console.error(`bench: ${error instanceof Error ? (error.stack ?? error.message) : error}`);
  process.exitCode = 1;
} finally {
  await cleanup.run();
}
