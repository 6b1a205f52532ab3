import type { Json, PrivateRedis, SmtpSink } from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startOnPrivateRedis, type Tessera } from './tessera.ts';

// Redis run without persistence (against the README's advice), killed and back empty: the emails
// still queued and the codes are lost, and access tokens fail closed until their clients refresh;
// a session ended before the crash stays ended.

let fault: Awaited<ReturnType<typeof startOnPrivateRedis>>;
let redis: PrivateRedis;
let sink: SmtpSink;
let tessera: Tessera;

beforeAll(async () => {
  fault = await startOnPrivateRedis(['--appendonly', 'no']);
  ({ redis, sink, tessera } = fault);
});
afterAll(() => fault?.remove());

async function signIn(email: string): Promise<Json> {
  const code = await tessera.codeByEmail(email);
  const signedIn = await tessera.call('POST', '/api/v1/auth/verify-otp-email', { email, code });
  expect(signedIn.status).toBe(200);
  return signedIn.json.data;
}

const sessions = (accessToken: string) =>
  tessera.call('GET', '/api/v1/auth/sessions', undefined, accessToken);
const refresh = (refreshToken: string) =>
  tessera.call('POST', '/api/v1/auth/refresh-token', { refreshToken });

it('loses the queued emails and the codes; access tokens fail closed until a refresh, ended sessions stay ended', {
  timeout: 60_000,
}, async () => {
  const mailer = tessera.startMailer();
  const kept = await signIn('kept@example.com');
  const ended = await signIn('ended@example.com');
  expect((await tessera.call('POST', '/api/v1/auth/logout', {}, ended.accessToken)).status).toBe(200);
  await mailer.stop('SIGTERM');

  // Queued with no mailer to send them, and a code waiting to be typed.
  const queued = ['lost.0@example.com', 'lost.1@example.com', 'lost.2@example.com'];
  for (const email of queued) {
    expect((await tessera.call('POST', '/api/v1/auth/send-otp-email', { email })).status).toBe(200);
  }
  await redis.stop('SIGKILL');
  await redis.start();
  await tessera.readyAgain();

  // The session is in Postgres, its mark of being active was in Redis: refused until refreshed.
  const refused = await sessions(kept.accessToken);
  expect(refused.status).toBe(401);
  expect(refused.json.errors).toContain('The session of this access token has ended');
  const refreshed = await refresh(kept.refreshToken);
  expect(refreshed.status).toBe(200);
  expect((await sessions(refreshed.json.data.accessToken)).status).toBe(200);
  // Logged out before the crash: nothing brings it back.
  expect((await refresh(ended.refreshToken)).status).toBe(401);

  // The codes are gone…
  expect(
    (await tessera.call('POST', '/api/v1/auth/verify-otp-email', { email: queued[0], code: '0000' })).status,
  ).toBe(404);
  // …and so are the queued emails: a mailer sends the code asked for after the crash, and only it.
  tessera.startMailer();
  await tessera.codeByEmail('after@example.com');
  expect(sink.messages.filter((mail) => queued.some((email) => mail.to.includes(email)))).toEqual([]);
});
