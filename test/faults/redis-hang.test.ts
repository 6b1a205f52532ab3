import { type PrivateRedis, waitUntil } from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startOnPrivateRedis, type Tessera } from './tessera.ts';

// Redis hung with its connections open (SIGSTOP: no reset, no answer), as a stalled or partitioned
// server looks to its clients: the gateway answers 503 with Retry-After instead of holding requests
// (a refresh, which rotates in Postgres, still gets its pair), and serves as before once Redis
// answers again. The first command unanswered for 2 s has the gateway connect again, and until
// Redis answers on the new connection every command fails at once.

let fault: Awaited<ReturnType<typeof startOnPrivateRedis>>;
let redis: PrivateRedis;
let tessera: Tessera;
type Answer = Awaited<ReturnType<Tessera['call']>>;

beforeAll(async () => {
  // A grace of a second, so that a token replaced before the hang is a reuse during it.
  fault = await startOnPrivateRedis([], { REFRESH_REUSE_GRACE: '1' });
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
  const { json: other } = await tessera.call('POST', '/api/v1/auth/verify-otp-email', {
    email: 'stolen@example.com',
    code: await tessera.codeByEmail('stolen@example.com'),
  });
  const replaced = other.data.refreshToken;
  const { json: rotated } = await tessera.call('POST', '/api/v1/auth/refresh-token', {
    refreshToken: replaced,
  });
  await new Promise((resolve) => setTimeout(resolve, 1_100));

  redis.pause();
  let refreshed: Answer;
  try {
    // Each call gives up after 10 s (tessera.call): a request held until Redis answers fails here.
    const answers: Answer[] = await Promise.all([
      tessera.call('POST', '/api/v1/auth/send-otp-email', { email: 'during@example.com' }),
      tessera.call('GET', '/api/v1/auth/sessions', undefined, accessToken),
    ]);
    // A refresh needs Postgres for its rotation: its pair goes out, so the client does not keep the
    // token it replaced, which would be taken for a theft once REFRESH_REUSE_GRACE has passed.
    refreshed = await tessera.call('POST', '/api/v1/auth/refresh-token', { refreshToken });
    expect(refreshed.status).toBe(200);
    // A replaced token presented after the grace ends its session; Redis fails the session key's
    // delete (503), and the theft is recorded all the same. The session's current token then gets
    // no pair for the session that has ended: 503 as well.
    answers.push(await tessera.call('POST', '/api/v1/auth/refresh-token', { refreshToken: replaced }));
    answers.push(
      await tessera.call('POST', '/api/v1/auth/refresh-token', { refreshToken: rotated.data.refreshToken }),
    );
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(answer.json).toMatchObject({ isSuccess: false, statusCode: 503, data: null });
      expect(answer.json.errors[0]).toBe('Service unavailable');
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  } finally {
    redis.resume();
  }
  // Its connections made again (the next attempt comes within 2 s of the last), the gateway is ready.
  await waitUntil('the gateway ready again', async () => (await fetch(`${tessera.baseUrl}/health/ready`)).ok);

  const { json: events } = await tessera.call(
    'GET',
    '/api/v1/users/me/security-events',
    undefined,
    (
      await tessera.call('POST', '/api/v1/auth/verify-otp-email', {
        email: 'stolen@example.com',
        code: await tessera.codeByEmail('stolen@example.com'),
      })
    ).json.data.accessToken,
  );
  expect(events.data.list.map((event: { type: string }) => event.type)).toContain('refresh_reuse');
  expect(
    (await tessera.call('GET', '/api/v1/auth/sessions', undefined, rotated.data.accessToken)).status,
  ).toBe(401);

  // The pair it got works once Redis answers again.
  expect(
    (await tessera.call('GET', '/api/v1/auth/sessions', undefined, refreshed.json.data.accessToken)).status,
  ).toBe(200);
  expect((await tessera.call('GET', '/api/v1/auth/sessions', undefined, accessToken)).status).toBe(200);
  expect(
    (await tessera.call('POST', '/api/v1/auth/send-otp-email', { email: 'after@example.com' })).status,
  ).toBe(200);
});
