import type { ObservableResult } from '@opentelemetry/api';
import { meter, withTimeout } from '@tessera/telemetry';
import type { Queue } from 'bullmq';

const OUTCOMES = ['sent', 'failed', 'retried', 'expired'] as const;

/** `tessera_emails_total{outcome}` in Prometheus. */
export const emails = meter.createCounter<{ outcome: (typeof OUTCOMES)[number] }>('tessera.emails', {
  description:
    'Emails (codes, account notices) by outcome: sent, failed (for good), retried (a failed attempt that will be retried) or expired (its deadline passed before it could be sent)',
});
// Every series from the start, so that rate() and alerts see the first email too.
for (const outcome of OUTCOMES) emails.add(0, { outcome });

/**
 * `tessera_email_queue_jobs{state}`: read from Redis at each scrape, so it is the whole queue's; `NaN`
 * when Redis does not answer in time.
 */
const queueJobs = meter.createObservableGauge('tessera.email.queue.jobs', {
  description: 'Jobs in the email queue by state: waiting, active, delayed or failed',
});

const STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
const SAMPLE_TIMEOUT_MS = 3000;

/** Reports the queue's job counts at every scrape until the returned function is called. */
export function observeQueueJobs(queue: Queue): () => void {
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
