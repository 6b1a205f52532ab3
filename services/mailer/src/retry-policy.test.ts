import { DELETION_CANCELLED_JOB, NOTICE_RETRY_WINDOW_MS, SEND_OTP_JOB } from '@tessera/contracts';
import { describe, expect, it } from 'vitest';
import { BACKOFF, backoffDelay, deliveryDeadline, NOTICE_BACKOFF } from './retry-policy.ts';

describe('backoffDelay', () => {
  it('doubles from 1 s and stays at 15 s', () => {
    const delays = Array.from({ length: 8 }, (_, i) => backoffDelay(i + 1, BACKOFF));
    expect(delays).toEqual([1000, 2000, 4000, 8000, 15_000, 15_000, 15_000, 15_000]);
    // However many retries an outage takes.
    expect(backoffDelay(5000, BACKOFF)).toBe(15_000);
  });

  it('follows the backoff it is given', () => {
    expect([1, 2, 3, 4].map((retry) => backoffDelay(retry, { firstMs: 20, maxMs: 50 }))).toEqual([
      20, 40, 50, 50,
    ]);
  });

  /** Retries that fit before a deadline `windowMs` after the first attempt. */
  const retriesWithin = (windowMs: number, backoff: typeof BACKOFF) => {
    let elapsed = 0;
    let retries = 0;
    while (elapsed + backoffDelay(retries + 1, backoff) < windowMs)
      elapsed += backoffDelay(++retries, backoff);
    return retries;
  };

  it('retries a 5-minute code 22 times before it expires, not 4', () => {
    expect(retriesWithin(300_000, BACKOFF)).toBe(22);
  });

  it("retries an account notice 152 times in its day, not 5,700, and an hour's outage over within 10 minutes", () => {
    expect(retriesWithin(NOTICE_RETRY_WINDOW_MS, NOTICE_BACKOFF)).toBe(152);
    expect(retriesWithin(NOTICE_RETRY_WINDOW_MS, BACKOFF)).toBeGreaterThan(5700);
    expect(backoffDelay(100, NOTICE_BACKOFF)).toBe(600_000);
  });
});

describe('deliveryDeadline', () => {
  it("is a code's expiry, and a day after it was queued for an account notice", () => {
    const expiresAt = '2026-03-01T12:05:00.000Z';
    const timestamp = Date.parse('2026-03-01T12:00:00.000Z');
    expect(deliveryDeadline({ name: SEND_OTP_JOB, data: { expiresAt }, timestamp })).toBe(
      Date.parse(expiresAt),
    );
    expect(deliveryDeadline({ name: DELETION_CANCELLED_JOB, data: {}, timestamp })).toBe(
      timestamp + NOTICE_RETRY_WINDOW_MS,
    );
  });
});
