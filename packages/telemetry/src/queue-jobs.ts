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
  description: 'Time since the oldest waiting email job was queued; 0 when none waits',
  unit: 's',
});

const STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
const SAMPLE_TIMEOUT_MS = 3000;

/** What is read of a BullMQ queue. */
interface SampledQueue {
  getJobCounts(...states: string[]): Promise<Record<string, number>>;
  getJobs(
    types: ['waiting'],
    start: number,
    end: number,
    asc: boolean,
  ): Promise<Array<{ timestamp: number }>>;
}

/** What a Redis read resolves with, or undefined when it fails or does not answer in time. */
function read<T>(promise: Promise<T>): Promise<T | undefined> {
  return withTimeout(promise, SAMPLE_TIMEOUT_MS, 'queue sampling').catch(() => undefined);
}

/** Seconds since `job` was queued; 0 when there is none. */
function age(job: { timestamp: number } | undefined): number {
  return job ? Math.max(0, Date.now() - job.timestamp) / 1000 : 0;
}

/** Reports the queue's job counts and its oldest waiting job's age at every scrape until the returned function is called. */
export function observeQueueJobs(queue: SampledQueue): () => void {
  const sample = async (result: BatchObservableResult) => {
    // Unknown, not left out: the SDK would go on exporting the last values it was given.
    const [counts, waiting] = await Promise.all([
      read(queue.getJobCounts(...STATES)),
      // The wait list is oldest last; ascending order starts with it. A retried job keeps the time it
      // was first queued.
      read(queue.getJobs(['waiting'], 0, 0, true)),
    ]);
    for (const state of STATES)
      result.observe(queueJobs, counts ? (counts[state] ?? 0) : Number.NaN, { state });
    result.observe(oldestWaiting, waiting ? age(waiting[0]) : Number.NaN);
  };
  meter.addBatchObservableCallback(sample, [queueJobs, oldestWaiting]);
  return () => meter.removeBatchObservableCallback(sample, [queueJobs, oldestWaiting]);
}
