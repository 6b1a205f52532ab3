import type { PrivateRedis } from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startOnPrivateRedis, type Tessera } from './tessera.ts';

// Redis hung with its connections open (SIGSTOP: no reset, no answer), as a stalled or partitioned
// server looks to its clients: the gateway answers 503 with Retry-After instead of holding requests,
// and serves as before once Redis answers again.

let fault: Awaited<ReturnType<typeof startOnPrivateRedis>>;
let redis: PrivateRedis;
let tessera: Tessera;

beforeAll(async () => {
  fault = await startOnPrivateRedis();
  ({ redis, tessera } = fault);
  tessera.startMailer();
});
afterAll(() => fault?.remove());

it('answers 503 while Redis hangs, and serves as before once it answers', { timeout: 60_000 }, async () => {
  const code = await tessera.codeByEmail('hung@example.com');
  const { json: signedIn } = await tessera.call('POST', '/api/v1/auth/verify-otp-email', {
    email: 'hung@example.com',
    code,
  });
  const { accessToken, refreshToken } = signedIn.data;

  redis.pause();
  try {
    // Each call gives up after 10 s (tessera.call): a request held until Redis answers fails here.
    const answers = await Promise.all([
      tessera.call('POST', '/api/v1/auth/send-otp-email', { email: 'during@example.com' }),
      tessera.call('GET', '/api/v1/auth/sessions', undefined, accessToken),
      tessera.call('POST', '/api/v1/auth/refresh-token', { refreshToken }),
    ]);
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(answer.json).toMatchObject({ isSuccess: false, statusCode: 503, data: null });
      expect(answer.json.errors[0]).toBe('Service unavailable');
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  } finally {
    redis.resume();
  }

  // The refresh that met the hang may have rotated the token before Redis failed it: retried at once
  // (inside REFRESH_REUSE_GRACE), the same token gets a working pair, not a reuse alarm.
  const refreshed = await tessera.call('POST', '/api/v1/auth/refresh-token', { refreshToken });
  expect(refreshed.status).toBe(200);
  expect(
    (await tessera.call('GET', '/api/v1/auth/sessions', undefined, refreshed.json.data.accessToken)).status,
  ).toBe(200);
  expect((await tessera.call('GET', '/api/v1/auth/sessions', undefined, accessToken)).status).toBe(200);
  expect(
    (await tessera.call('POST', '/api/v1/auth/send-otp-email', { email: 'after@example.com' })).status,
  ).toBe(200);
});
