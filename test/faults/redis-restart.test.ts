import { DURABLE_REDIS_ARGS, type PrivateRedis, type SmtpSink, waitUntil } from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startOnPrivateRedis, type Tessera } from './tessera.ts';

// Redis as the README tells operators to run it (AOF, fsync every second, no eviction), crashed
// with SIGKILL while sends are queued and no mailer runs: the gateway answers 503s while it is away,
// and every send it accepted before the crash is emailed once the mailer comes.

let fault: Awaited<ReturnType<typeof startOnPrivateRedis>>;
let redis: PrivateRedis;
let sink: SmtpSink;
let tessera: Tessera;

beforeAll(async () => {
  fault = await startOnPrivateRedis(DURABLE_REDIS_ARGS);
  ({ redis, sink, tessera } = fault);
});
afterAll(() => fault?.remove());

it('keeps every accepted send across a Redis crash, and answers 503 with Retry-After while Redis is away', {
  timeout: 60_000,
}, async () => {
  const people = Array.from({ length: 12 }, (_, i) => `queued.${i}@example.com`);
  for (const email of people) {
    expect((await tessera.call('POST', '/api/v1/auth/send-otp-email', { email })).status).toBe(200);
  }
  // appendfsync everysec: what a process crash can lose is what was not yet written, well under this.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  await redis.stop('SIGKILL');

  const refused = await tessera.call('POST', '/api/v1/auth/send-otp-email', { email: 'during@example.com' });
  expect(refused.status).toBe(503);
  expect(refused.json).toMatchObject({ isSuccess: false, statusCode: 503 });
  expect(refused.json.errors[0]).toBe('Service unavailable');
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);

  await redis.start();
  await tessera.readyAgain();
  tessera.startMailer();
  const emailed = (email: string) => sink.messages.some((mail) => mail.to.includes(email));
  await waitUntil('every accepted send emailed', () => people.every(emailed)).catch(() => {
    expect(
      people.filter((email) => !emailed(email)),
      'accepted sends never emailed',
    ).toEqual([]);
  });
  // Each once: a mailer that sees the restored queue does not send a job twice.
  await new Promise((resolve) => setTimeout(resolve, 500));
  for (const email of people) expect(sink.messages.filter((mail) => mail.to.includes(email))).toHaveLength(1);

  // And the service works as before.
  const code = await tessera.codeByEmail('after@example.com');
  const verified = await tessera.call('POST', '/api/v1/auth/verify-otp-email', {
    email: 'after@example.com',
    code,
  });
  expect(verified.status).toBe(200);
});
