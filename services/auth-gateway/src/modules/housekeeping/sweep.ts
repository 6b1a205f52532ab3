import { meter } from '@tessera/telemetry';
import type { FastifyBaseLogger } from 'fastify';

const sweepFailures = meter.createCounter('tessera.sweep.failures', {
  description: 'Runs of background work (a sweep, the OTP_SECRET check) that failed; retried at the next run',
});

export interface SweepOptions {
  /** What the sweep does, for logs and metrics: `account_deletion`, `retention`, `otp_secret_check`. */
  name: string;
  /**
   * Called at the start of each run: what handles a batch of up to `limit` rows in that run, and
   * answers how many it handled; its `end`, if any, is called when the run ends, however it ends.
   */
  batches: () => Batches;
  /** Seconds between two runs. */
  interval: number;
  log: FastifyBaseLogger;
  /** Rows per batch (and per transaction), so that no run holds many row locks for long. */
  batchSize?: number;
  /**
   * Whether the tables are there to work on: a run is skipped, quietly, while this is false (a
   * database that lacks migrations, which the gateway warned of at start).
   */
  ready?: () => Promise<boolean>;
}

type Batches = ((limit: number) => Promise<number>) & { end?: () => void };

/**
 * Background work on what Postgres holds, at once when started and then every `interval` seconds,
 * batch after batch until a batch comes back short. Every gateway process runs each sweep: the work
 * lives in Postgres, so it happens whatever restarts in between, and the batches lock their rows
 * (SKIP LOCKED) so that the processes share the work. A failed run (Postgres or Redis down) is
 * logged and counted, and the next run tries again. (The `OTP_SECRET` check runs on it too, as one
 * batch of nothing: the same start, interval, stop and failures.)
 */
export function createSweep({
  name,
  batches,
  interval,
  log,
  batchSize = 100,
  ready = async () => true,
}: SweepOptions) {
  sweepFailures.add(0, { sweep: name });
  let stopped = true;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  async function run(): Promise<void> {
    let runBatch: Batches | undefined;
    try {
      if (!(await ready())) {
        log.debug({ sweep: name }, 'sweep skipped: the database lacks migrations');
        return;
      }
      runBatch = batches();
      while (!stopped) {
        if ((await runBatch(batchSize)) < batchSize) return;
      }
    } catch (err) {
      sweepFailures.add(1, { sweep: name });
      log.error({ err, sweep: name }, 'sweep failed; the next run tries again');
    } finally {
      runBatch?.end?.();
      log.debug({ sweep: name }, 'sweep run ended');
    }
  }

  function schedule(delayMs: number): void {
    timer = setTimeout(() => {
      running = run().finally(() => {
        running = undefined;
        if (!stopped) schedule(interval * 1000);
      });
    }, delayMs);
    // The server keeps the process alive, not the sweep.
    timer.unref();
  }

  return {
    /** Runs at once (for what came due while no process ran), then every `interval` seconds. */
    start(): void {
      if (!stopped) return;
      stopped = false;
      schedule(0);
    },

    /** Starts no further run or batch; resolves once the batch in progress has committed. */
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
