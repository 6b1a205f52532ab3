import { describe, expect, it } from 'vitest';
import { parseRetryAfter, TesseraError } from './errors.ts';

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-11-22T10:00:00.000Z');

  it('reads delta-seconds as sent', () => {
    expect(parseRetryAfter('42', now)).toBe(42);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
  });

  it('turns an HTTP date into the seconds left until it, never negative', () => {
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:01:30 GMT', now)).toBe(90);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).toBe(0);
  });

  it('is undefined without a header or with one it cannot read', () => {
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
  });
});

describe('TesseraError', () => {
  it('reads as the canonical message followed by the details', () => {
    const error = new TesseraError({
      status: 400,
      messages: ['Validation failed', 'code: must be 4 digits'],
    });
    expect(error.message).toBe('Validation failed: code: must be 4 digits');
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('TesseraError');
    expect(error.isNetworkError).toBe(false);
    expect(error.retryAfter).toBeUndefined();
  });
});
