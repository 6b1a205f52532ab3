import { DELETION_CANCELLED_JOB, NOTICE_RETRY_WINDOW_MS, SEND_OTP_JOB } from '@tessera/contracts';
import { describe, expect, it } from 'vitest';
import { BACKOFF, backoffDelay, deliveryDeadline } from './retry-policy.ts';

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

  it('retries a 5-minute code 22 times before it expires, not 4', () => {
    let elapsed = 0;
    let retries = 0;
    while (elapsed + backoffDelay(retries + 1, BACKOFF) < 300_000)
      elapsed += backoffDelay(++retries, BACKOFF);
    expect(retries).toBe(22);
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
