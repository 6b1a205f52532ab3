import { NOTICE_RETRY_WINDOW_MS, SEND_OTP_JOB } from '@tessera/contracts';
import { UnrecoverableError } from 'bullmq';

/** Retry delays: `firstMs` doubling at each retry, never more than `maxMs`. */
export interface Backoff {
  firstMs: number;
  maxMs: number;
}

/** 1 s, 2 s, 4 s, 8 s, then every 15 s: an SMTP server back after an outage is used within 15 s. */
export const BACKOFF: Backoff = { firstMs: 1000, maxMs: 15_000 };

/**
 * An account notice's, which has a day: doubling on to every 10 minutes, as a mail server's queue
 * retries, so that a relay refusing it (4xx, or 5.7.x on policy) is not asked every 15 s all day.
 */
export const NOTICE_BACKOFF: Backoff = { firstMs: 1000, maxMs: 600_000 };

/** Delay before retry number `retry` (1 for the first). */
export function backoffDelay(retry: number, { firstMs, maxMs }: Backoff): number {
  return Math.min(maxMs, firstMs * 2 ** (retry - 1));
}

/** Until when (ms since the epoch) a job is worth sending: its code's expiry, or a day after it was queued. */
export function deliveryDeadline(job: { name: string; data: unknown; timestamp: number }): number {
  if (job.name === SEND_OTP_JOB) return Date.parse((job.data as { expiresAt: string }).expiresAt);
  return job.timestamp + NOTICE_RETRY_WINDOW_MS;
}

/** A job that reached its deadline undelivered: not retried, counted and logged as `expired`. */
export class ExpiredError extends UnrecoverableError {}
