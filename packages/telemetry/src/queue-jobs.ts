import type { BatchObservableResult } from '@opentelemetry/api';
import { meter } from './metrics.ts';
import { withTimeout } from './operations.ts';

/**
 * `tessera_email_queue_jobs{state}` and `tessera_email_queue_oldest_waiting_seconds`: read from Redis
 * at each scrape, so they are the whole queue's; `NaN` when Redis does not answer in time. The gateways
 * report the queue they fill and the mailers the one they empty, so jobs waiting where no mailer looks
 * (a mailer on another BULLMQ_PREFIX, or none running) still show, and grow old.
 */
const queueJobs = meter.createObservableGauge('tessera.email.queue.jobs', {
  description: 'Jobs in the email queue by state: waiting, active, delayed or failed',
});
const oldestWaiting = meter.createObservableGauge('tessera.email.queue.oldest.waiting.seconds', {
  description: 'Time since the next email job a mailer will take was queued; 0 when none waits',
  unit: 's',
});

const STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
const SAMPLE_TIMEOUT_MS = 3000;

/**
 * When the next job a worker takes was queued (BullMQ pushes jobs on the left of the wait list and
 * takes them from the right): its hash's `timestamp`, not its data, which holds the recipient and
 * the sealed code; false when none waits. A retried job keeps the time it was first queued.
 */
const NEXT_QUEUED_AT = `local id = redis.call('LINDEX', KEYS[1], -1)
if not id then return false end
return redis.call('HGET', ARGV[1] .. id, 'timestamp') or false`;

/** What is read of a BullMQ queue. */
interface SampledQueue {
  getJobCounts(...states: string[]): Promise<Record<string, number>>;
  /** A key of the queue: `toKey('wait')`, and a job's `toKey(id)`. */
  toKey(type: string): string;
}

/** The queue's Redis connection (ioredis, one server or a cluster). */
interface ScriptRunner {
  eval(script: string, numberOfKeys: number, ...args: string[]): Promise<unknown>;
}

/** What a Redis read resolves with, or undefined when it fails or does not answer in time. */
function read<T>(promise: Promise<T>): Promise<T | undefined> {
  return withTimeout(promise, SAMPLE_TIMEOUT_MS, 'queue sampling').catch(() => undefined);
}

/** Seconds since `queuedAt` (a job's timestamp in ms, as Redis answers it); 0 when none waits (null). */
function age(queuedAt: unknown): number {
  const since = Date.now() - Number(queuedAt);
  return queuedAt && Number.isFinite(since) ? Math.max(0, since) / 1000 : 0;
}

/**
 * Reports the queue's job counts and how long its next job has waited at every scrape, each read
 * apart, until the returned function is called.
 */
export function observeQueueJobs(queue: SampledQueue, redis: ScriptRunner): () => void {
  const sample = async (result: BatchObservableResult) => {
    // Unknown, not left out: the SDK would go on exporting the last values it was given.
    const [counts, queuedAt] = await Promise.all([
      read(queue.getJobCounts(...STATES)),
      read(redis.eval(NEXT_QUEUED_AT, 1, queue.toKey('wait'), queue.toKey(''))),
    ]);
    for (const state of STATES)
      result.observe(queueJobs, counts ? (counts[state] ?? 0) : Number.NaN, { state });
    result.observe(oldestWaiting, queuedAt === undefined ? Number.NaN : age(queuedAt));
  };
  meter.addBatchObservableCallback(sample, [queueJobs, oldestWaiting]);
  return () => meter.removeBatchObservableCallback(sample, [queueJobs, oldestWaiting]);
}
