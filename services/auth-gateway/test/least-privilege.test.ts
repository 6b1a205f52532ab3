import { readFile } from 'node:fs/promises';
import { migrateToLatest } from '@tessera/infra';
import { createDatabase, type PrivatePostgres, startPrivatePostgres } from '@tessera/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ageRotations,
  bearer,
  body,
  capturedLog,
  manualClock,
  post,
  sidOf,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

// The gateway as a role that owns nothing, with exactly the grants the README gives (Operations,
// Least privilege), on a Postgres server of the test's own (roles are the server's): every flow and
// both sweeps, and no "permission denied". A migration that adds a table fails it until the README
// grants it.

const clock = manualClock();
const { lines: logLines, logStream } = capturedLog();
let server: PrivatePostgres;
let gateway: TestGateway;
beforeAll(async () => {
  server = await startPrivatePostgres();
  const ownerUrl = await createDatabase(server.adminUrl, 'tessera');
  await migrateToLatest(ownerUrl);
  const readme = await readFile(new URL('../../../README.md', import.meta.url), 'utf8');
  const grants = readme.match(/^ *GRANT .+ TO tessera_gateway;$/gm) ?? [];
  expect(grants.length).toBeGreaterThan(0);
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  try {
    await owner.query('create role tessera_gateway login');
    // Nothing from PUBLIC: only what the README grants.
    await owner.query('revoke all on database tessera from public');
    await owner.query('revoke all on schema public from public');
    for (const grant of grants) await owner.query(grant.trim());
  } finally {
    await owner.end();
  }
  const url = new URL(ownerUrl);
  url.username = 'tessera_gateway';
  gateway = await startGateway(
    {
      DATABASE_URL: url.toString(),
      LOG_LEVEL: 'info',
      ACCOUNT_DELETION_GRACE: '60',
      ACCOUNT_DELETION_SWEEP_INTERVAL: '1',
      RETENTION_SWEEP_INTERVAL: '1',
      SESSION_RETENTION: '3600',
      SECURITY_EVENT_RETENTION: '7200',
    },
    { clock, logStream },
  );
});
afterAll(async () => {
  await gateway?.close();
  await server?.remove();
});

const refused = () =>
  logLines.filter((line) => Number(line.level) >= 50 || JSON.stringify(line).includes('permission denied'));

describe("a gateway role with the README's grants only", () => {
  it('signs in, refreshes, lists, updates the profile and the username, revokes and logs out', async () => {
    const first = await signIn(gateway.app, 'least@example.com');
    const second = await signIn(gateway.app, 'least@example.com');
    const refreshed = await post(gateway.app, '/api/v1/auth/refresh-token', {
      refreshToken: first.refreshToken,
    });
    expect(refreshed.statusCode).toBe(200);
    const { accessToken } = body(refreshed).data;
    for (const url of [
      '/api/v1/auth/sessions',
      '/api/v1/users/me/security-events',
      '/api/v1/users/me/registration',
    ])
      expect((await gateway.app.inject({ url, headers: bearer(accessToken) })).statusCode, url).toBe(200);
    const patched = await gateway.app.inject({
      method: 'PATCH',
      url: '/api/v1/users/me',
      headers: bearer(accessToken),
      payload: { name: 'Ada', username: 'least.ada' },
    });
    expect(patched.statusCode).toBe(200);
    const revoked = await post(
      gateway.app,
      '/api/v1/auth/revoke-token',
      { refreshToken: second.refreshToken },
      bearer(accessToken),
    );
    expect(revoked.statusCode).toBe(200);
    expect((await post(gateway.app, '/api/v1/auth/logout', {}, bearer(accessToken))).statusCode).toBe(200);
    expect(refused()).toEqual([]);
  });

  it('refuses a wrong code and a reused refresh token, ends one session, cancels a deletion, each recorded', async () => {
    const email = 'refused@example.com';
    const first = await signIn(gateway.app, email);
    // A wrong code for the account, then the right one.
    const { code } = body(await post(gateway.app, '/api/v1/auth/send-otp-email', { email })).data;
    const wrong = String((Number(code) + 1) % 10_000).padStart(4, '0');
    expect(
      (await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code: wrong })).statusCode,
    ).toBe(400);
    const second = body(await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code })).data;
    const third = await signIn(gateway.app, email);
    // The first session's token, used again past the grace: a theft, which ends that session.
    expect(
      (await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: first.refreshToken }))
        .statusCode,
    ).toBe(200);
    await ageRotations(gateway, gateway.config.sessions.refreshReuseGrace + 1);
    expect(
      (await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: first.refreshToken }))
        .statusCode,
    ).toBe(401);
    const ended = await gateway.app.inject({
      method: 'DELETE',
      url: `/api/v1/auth/sessions/${sidOf(second.accessToken)}`,
      headers: bearer(third.accessToken),
    });
    expect(ended.statusCode).toBe(200);
    for (const method of ['POST', 'DELETE'] as const) {
      const deletion = await gateway.app.inject({
        method,
        url: '/api/v1/users/me/deletion',
        headers: bearer(third.accessToken),
      });
      expect(deletion.statusCode, method).toBe(200);
    }
    const events = body(
      await gateway.app.inject({
        url: '/api/v1/users/me/security-events?limit=20',
        headers: bearer(third.accessToken),
      }),
    ).data.list.map((event: { type: string }) => event.type);
    expect(events).toEqual(
      expect.arrayContaining([
        'sign_in_failed',
        'refresh_reuse',
        'session_revoked',
        'deletion_requested',
        'deletion_cancelled',
      ]),
    );
    expect(refused()).toEqual([]);
  });

  it('finalizes a deletion, and deletes what is past retention, in its sweeps', async () => {
    const { accessToken, user } = await signIn(gateway.app, 'leaving@example.com');
    const requested = await gateway.app.inject({
      method: 'POST',
      url: '/api/v1/users/me/deletion',
      headers: bearer(accessToken),
    });
    expect(requested.statusCode).toBe(200);
    const users = async () =>
      (
        await gateway.app.db
          .selectFrom('users')
          .select('email')
          .where('id', '=', user._id as string)
          .executeTakeFirst()
      )?.email;
    // Past the grace, the deletion sweep erases the account.
    clock.advance(61);
    await vi.waitFor(async () => expect(await users()).toMatch(/^deleted-.+@tombstone\.invalid$/i), {
      timeout: 5000,
    });
    // Past the retentions, the retention sweep deletes the ended sessions and the events.
    clock.advance(7201);
    await vi.waitFor(
      async () => {
        const left = await gateway.app.db.selectFrom('securityEvents').select('id').execute();
        expect(left).toEqual([]);
      },
      { timeout: 5000 },
    );
    expect(refused()).toEqual([]);
  });
});
