import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TesseraError } from './errors.ts';
import { type Fetch, type FetchResponse, send } from './request.ts';

const envelope = (data: unknown): FetchResponse => ({
  status: 200,
  headers: { get: () => null },
  text: async () => JSON.stringify({ isSuccess: true, statusCode: 200, data, errors: [], timestamp: '' }),
});
const transport = (fetch: Fetch, timeout: number) => ({
  baseUrl: 'http://tessera.test',
  fetch,
  now: Date.now,
  timeout,
});
const call = { method: 'GET', path: '/api/v1/users/me' } as const;

describe('send with a timeout', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fails as a network error once the timeout passes, also when fetch ignores the abort', async () => {
    let signal: AbortSignal | undefined;
    const hanging: Fetch = (_url, init) => {
      signal = (init as { signal?: AbortSignal }).signal;
      return new Promise(() => {});
    };
    const answer = send(transport(hanging, 5000), call).catch((error: unknown) => error);

    await vi.advanceTimersByTimeAsync(4999);
    expect(signal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);

    const error = await answer;
    expect(error).toBeInstanceOf(TesseraError);
    expect(error).toMatchObject({
      status: 0,
      isNetworkError: true,
      messages: ['The server did not answer in time'],
    });
    expect(signal?.aborted).toBe(true);
  });

  it.each([0, Number.POSITIVE_INFINITY])('waits for ever with a timeout of %s', async (timeout) => {
    const slow: Fetch = (_url, init) => {
      expect(init).not.toHaveProperty('signal');
      return new Promise((resolve) => setTimeout(() => resolve(envelope({ name: 'Alice' })), 600_000));
    };
    const answer = send(transport(slow, timeout), call);

    await vi.advanceTimersByTimeAsync(600_000);

    await expect(answer).resolves.toEqual({ name: 'Alice' });
  });
});
