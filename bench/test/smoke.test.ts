import { execFileSync } from 'node:child_process';
import type {} from '@tessera/testing';
import { expect, inject, it, vi } from 'vitest';
import { DEFAULTS, runBench } from '../src/bench.ts';
import { Cleanup } from '../src/cleanup.ts';
import { renderReport } from '../src/report.ts';
import { SCENARIO_NAMES } from '../src/scenarios.ts';

// Keeps `pnpm bench` from rotting: every flow runs for about a second. Speed is not asserted here;
// the numbers of a run this short on a busy machine mean nothing.
const smoke = () => ({
  ...DEFAULTS,
  duration: 1,
  connections: 4,
  emails: 50,
  idleSamples: 5,
  adminUrl: inject('postgresUrl'),
});

it('runs every flow against a real gateway and mailer, each with successful requests and no failure', async () => {
  const cleanup = new Cleanup();
  try {
    const report = await runBench(smoke(), cleanup);

    const [target] = report.targets;
    expect(report.targets).toHaveLength(1);
    expect(target?.rows.map((row) => row.name)).toEqual([...SCENARIO_NAMES]);
    for (const row of target?.rows ?? []) {
      expect({ flow: row.name, failures: row.failures }).toEqual({ flow: row.name, failures: {} });
      expect(row.ops, row.name).toBeGreaterThan(0);
      expect(row.cpuMsPerOp.service, row.name).toBeGreaterThan(0);
    }
    for (const memory of [target?.gatewayMemoryPeak, target?.mailer?.memoryIdle]) {
      // The node binary's code is mapped from its file: RSS holds more than the anonymous part.
      expect(memory?.anonymous).toBeGreaterThan(0);
      expect(memory?.rss).toBeGreaterThan(memory?.anonymous ?? Number.POSITIVE_INFINITY);
    }
    expect(target?.mailer?.firstEmailMs).toBeGreaterThan(0);

    const table = renderReport(report);
    for (const row of target?.rows ?? []) expect(table).toContain(`| ${row.title} |`);
    expect(table).toMatch(/its first email after start [\d.]+ ms/);
    // Without autovacuum the Postgres column holds no vacuuming: the reader is told which.
    expect(table).toMatch(/Postgres [\d.]+ \(autovacuum (?:on|off)\)/);
  } finally {
    await cleanup.run();
  }
}, 90_000);

it('runs a flow as many rounds as asked and reports one row for it, the median run', async () => {
  const cleanup = new Cleanup();
  const progress: string[] = [];
  try {
    const report = await runBench({ ...smoke(), only: ['list-sessions'], rounds: 3 }, cleanup, (line) =>
      progress.push(line),
    );

    expect(report.targets[0]?.rows.map((row) => row.name)).toEqual(['list-sessions']);
    expect(progress.filter((line) => line.includes('list sessions, round'))).toHaveLength(3);
    expect(renderReport(report)).toContain('Each flow ran 3 times per revision');
  } finally {
    await cleanup.run();
  }
}, 90_000);

it('with --export-traces, both services send their spans to the receiver and the report says how much', async () => {
  const cleanup = new Cleanup();
  try {
    const report = await runBench(
      { ...smoke(), only: ['list-sessions', 'mail-drain'], exportTraces: true },
      cleanup,
    );

    const received = report.tracesReceived;
    expect(report.targets[0]?.rows.flatMap((row) => Object.keys(row.failures))).toEqual([]);
    expect(received?.get('tessera-auth-gateway')).toBeGreaterThan(0);
    expect(received?.get('tessera-mailer')).toBeGreaterThan(0);
    const table = renderReport(report);
    expect(table).toMatch(/Traces \(--export-traces\): every span exported .* by the end of the run/);
    for (const service of ['tessera-auth-gateway', 'tessera-mailer'])
      expect(table).toMatch(new RegExp(`[\\d.]+ MB from ${service}`));
  } finally {
    await cleanup.run();
  }
}, 90_000);

/** The pids of this process's children whose command line holds `part` (as testing/ finds them). */
function childrenRunning(part: string): number[] {
  try {
    const found = execFileSync('pgrep', ['-P', String(process.pid), '-f', part], { encoding: 'utf8' });
    return found.split('\n').filter(Boolean).map(Number);
  } catch {
    return []; // pgrep exits 1 when none matches.
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

it('stops the mailer too when the run is interrupted during the drain, as the CLI does on a signal', async () => {
  const cleanup = new Cleanup();
  let draining = false;
  const run = runBench({ ...smoke(), only: ['mail-drain'], emails: 100_000 }, cleanup, (line) => {
    draining ||= line.includes(': mailer drain');
  }).catch((error: unknown) => error);
  try {
    const mailers = await vi.waitFor(
      () => {
        // Not before: building the services runs each once, briefly, to fill the compile cache.
        const found = draining ? childrenRunning('services/mailer/dist/main.js') : [];
        if (found.length === 0) throw new Error('no mailer started yet');
        return found;
      },
      { timeout: 60_000, interval: 100 },
    );
    // What cli.ts does on SIGINT or SIGTERM before it exits: the drain's own `finally` never runs then.
    await cleanup.run();
    expect(mailers.filter(alive)).toEqual([]);
  } finally {
    await cleanup.run();
    await run;
  }
}, 90_000);
