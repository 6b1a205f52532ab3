import type { PrivatePostgres } from '@tessera/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startOnPrivatePostgres, type Tessera } from './tessera.ts';

// Postgres crashed (immediate stop) and later restarted under sign-ins: while it is away every
// answer is the enveloped 503 with Retry-After, nothing is half-written, and a code that met the
// outage still signs in once Postgres is back.

let fault: Awaited<ReturnType<typeof startOnPrivatePostgres>>;
let postgres: PrivatePostgres;
let databaseUrl: string;
let tessera: Tessera;

beforeAll(async () => {
  fault = await startOnPrivatePostgres();
  ({ postgres, databaseUrl, tessera } = fault);
  tessera.startMailer();
});
afterAll(() => fault?.remove());

const signIn = (email: string, code: string) =>
  tessera.call('POST', '/api/v1/auth/verify-otp-email', { email, code });

it('answers 503 while Postgres is down, writes nothing by halves, and signs in with the same code after', {
  timeout: 60_000,
}, async () => {
  const people = Array.from({ length: 8 }, (_, i) => `outage.${i}@example.com`);
  const codes = new Map<string, string>();
  for (const email of people) codes.set(email, await tessera.codeByEmail(email));
  // Half of them sign in before the crash.
  const [before, during] = [people.slice(0, 4), people.slice(4)];
  for (const email of before) expect((await signIn(email, codes.get(email) ?? '')).status).toBe(200);
  const { json: signedIn } = await signIn('kept@example.com', await tessera.codeByEmail('kept@example.com'));

  await postgres.stop('immediate');

  const answers = await Promise.all([
    ...during.map((email) => signIn(email, codes.get(email) ?? '')),
    tessera.call('POST', '/api/v1/auth/refresh-token', { refreshToken: signedIn.data.refreshToken }),
    tessera.call('POST', '/api/v1/auth/logout', {}, signedIn.data.accessToken),
  ]);
  for (const answer of answers) {
    expect(answer.status).toBe(503);
    expect(answer.json).toMatchObject({ isSuccess: false, statusCode: 503, data: null });
    expect(answer.json.errors[0]).toBe('Service unavailable');
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
  }
  expect((await fetch(`${tessera.baseUrl}/health/ready`)).status).toBe(503);

  await postgres.start();
  await tessera.readyAgain();
  // The codes the outage met were given back: the same code signs in.
  for (const email of during) expect((await signIn(email, codes.get(email) ?? '')).status).toBe(200);
  // The refresh that met the outage did not rotate the token: it still works, once.
  const refreshed = await tessera.call('POST', '/api/v1/auth/refresh-token', {
    refreshToken: signedIn.data.refreshToken,
  });
  expect(refreshed.status).toBe(200);
  // The logout that met the outage ended nothing and recorded nothing: once back, it ends the session.
  const loggedOut = await tessera.call('POST', '/api/v1/auth/logout', {}, refreshed.json.data.accessToken);
  expect(loggedOut.json.data).toEqual({ revokedSessions: 1 });

  // Nothing half-written: every user has exactly one session (with its refresh token), every
  // session has one token that is current.
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ email: string; sessions: number; current: number }>(
      `select u.email,
              count(distinct s.id)::int as sessions,
              count(t.token_hash) filter (where t.rotated_at is null)::int as current
         from users u
         left join sessions s on s.user_id = u.id
         left join refresh_tokens t on t.session_id = s.id
        group by u.email order by u.email`,
    );
    expect(rows).toEqual(
      [...people, 'kept@example.com'].sort().map((email) => ({ email, sessions: 1, current: 1 })),
    );
    const events = await client.query<{ type: string; details: unknown }>(
      `select e.type, e.details from security_events e join users u on u.id = e.user_id
        where u.email = 'kept@example.com' and e.type = 'logout'`,
    );
    expect(events.rows).toEqual([{ type: 'logout', details: { revokedSessions: 1 } }]);
  } finally {
    await client.end();
  }
});

it('keeps running when the connection of a statement in flight is lost, and the code still signs in', {
  timeout: 60_000,
}, async () => {
  const email = 'dropped@example.com';
  const code = await tessera.codeByEmail(email);
  // The sign-in's statement waits on a lock; its backend then dies (SIGKILL, as in a crash or an
  // out-of-memory kill), so the gateway's connection goes while the statement runs. Postgres then
  // restarts every backend, the lock's holder too.
  const admin = new pg.Client({ connectionString: databaseUrl });
  admin.on('error', () => {});
  await admin.connect();
  await admin.query('begin');
  await admin.query('lock table sessions in access exclusive mode');
  const answer = signIn(email, code);
  let waiting: number | undefined;
  while (waiting === undefined) {
    const { rows } = await admin.query<{ pid: number }>(
      `select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
    );
    waiting = rows[0]?.pid;
  }
  process.kill(waiting, 'SIGKILL');
  const dropped = await answer;
  expect(dropped.status).toBe(503);
  expect(dropped.json).toMatchObject({ isSuccess: false, statusCode: 503, data: null });
  await admin.end().catch(() => {});

  // The gateway is still there, and the code that met the lost connection was given back.
  await tessera.readyAgain();
  expect((await signIn(email, code)).status).toBe(200);
  expect(tessera.gateway.child.exitCode).toBeNull();
  expect(tessera.gateway.output()).not.toContain('uncaught');
});
