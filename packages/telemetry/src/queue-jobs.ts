import type { ObservableResult } from '@opentelemetry/api';
import { meter } from './metrics.ts';
import { withTimeout } from './operations.ts';

/**
 * `tessera_email_queue_jobs{state}`: read from Redis at each scrape, so it is the whole queue's; `NaN`
 * when Redis does not answer in time. The gateways report the queue they fill and the mailers the one
 * they empty, so jobs waiting where no mailer looks (a mailer on another BULLMQ_PREFIX) still show.
 */
const queueJobs = meter.createObservableGauge('tessera.email.queue.jobs', {
  description: 'Jobs in the email queue by state: waiting, active, delayed or failed',
});

const STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
const SAMPLE_TIMEOUT_MS = 3000;

/** What is read of a BullMQ queue. */
interface CountedQueue {
  getJobCounts(...states: string[]): Promise<Record<string, number>>;
}

/** Reports the queue's job counts at every scrape until the returned function is called. */
export function observeQueueJobs(queue: CountedQueue): () => void {
  const sample = async (result: ObservableResult) => {
    // Unknown, not left out: the SDK would go on exporting the last counts it was given.
    const counts = await withTimeout(
      queue.getJobCounts(...STATES),
      SAMPLE_TIMEOUT_MS,
      'queue sampling',
    ).catch(() => undefined);
    for (const state of STATES) result.observe(counts ? (counts[state] ?? 0) : Number.NaN, { state });
  };
  queueJobs.addCallback(sample);
  return () => queueJobs.removeCallback(sample);
}
