import { startOperationsServer } from '@tessera/telemetry';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
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

const { lines: logLines, logStream } = capturedLog();

const clock = manualClock();
let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway({ LOG_LEVEL: 'warn', TRUST_PROXY: 'true' }, { clock, logStream });
});
afterAll(() => gateway.close());

const device = { 'user-agent': 'Phone/1.0', 'x-forwarded-for': '203.0.113.44' };
const eventsOf = (userId: string) =>
  gateway.app.db
    .selectFrom('securityEvents')
    .select(['type', 'sessionId', 'ipAddress', 'userAgent', 'details', 'createdAt'])
    .where('userId', '=', userId)
    .orderBy('createdAt')
    .orderBy('id')
    .execute();

describe('the security log', () => {
  it("records the connection's peer for an X-Forwarded-For that holds no address, and an address given with its port without it", async () => {
    const addressesOf = async (userId: string) => [
      ...new Set((await eventsOf(userId)).map((e) => e.ipAddress)),
    ];
    const words = await signIn(gateway.app, 'forwarded-words@example.com', {
      'x-forwarded-for': 'Your account is locked - call 555 0100',
    });
    expect(await addressesOf(words.user._id as string)).toEqual(['127.0.0.1']);
    const zone = await signIn(gateway.app, 'forwarded-zone@example.com', {
      'x-forwarded-for': '2001:db8::1%Your-account-is-locked.Call-555-0100',
    });
    expect(await addressesOf(zone.user._id as string)).toEqual(['127.0.0.1']);
    const withPort = await signIn(gateway.app, 'forwarded-port@example.com', {
      'x-forwarded-for': '[2001:db8::7]:51234',
    });
    expect(await addressesOf(withPort.user._id as string)).toEqual(['2001:db8::7']);
  });

  it('records sign-in, revoke, sign-out of a device and logout with session, IP, user agent and time', async () => {
    const first = await signIn(gateway.app, 'audit@example.com', device);
    clock.advance(1);
    const second = await signIn(gateway.app, 'audit@example.com', device);
    const third = await signIn(gateway.app, 'audit@example.com', device);
    // A second between steps, so the log's time order is the order of events.
    clock.advance(1);
    await post(
      gateway.app,
      '/api/v1/auth/revoke-token',
      { refreshToken: first.refreshToken },
      {
        ...bearer(second.accessToken),
        ...device,
      },
    );
    clock.advance(1);
    await gateway.app.inject({
      method: 'DELETE',
      url: `/api/v1/auth/sessions/${sidOf(third.accessToken)}`,
      headers: { ...bearer(second.accessToken), ...device },
    });
    clock.advance(1);
    await post(gateway.app, '/api/v1/auth/logout', {}, { ...bearer(second.accessToken), ...device });

    const events = await eventsOf(first.user._id);
    expect(events.map((e) => [e.type, e.details])).toEqual([
      ['sign_in', {}],
      ['sign_in', {}],
      ['sign_in', {}],
      ['session_revoked', { via: 'refresh_token' }],
      ['session_revoked', { via: 'session_id' }],
      ['logout', { revokedSessions: 1 }],
    ]);
    expect(events[0]).toMatchObject({
      sessionId: sidOf(first.accessToken),
      ipAddress: '203.0.113.44',
      userAgent: 'Phone/1.0',
    });
    expect(events[3]?.sessionId).toBe(sidOf(first.accessToken));
    expect(events[4]?.sessionId).toBe(sidOf(third.accessToken));
    // A logout names the session that asked, one of those it ended.
    expect(events[5]).toMatchObject({ sessionId: sidOf(second.accessToken), createdAt: clock.now() });
  });

  it('records refresh-token reuse with the session it ended, and warns in the log', async () => {
    const { refreshToken, user, accessToken } = await signIn(gateway.app, 'reuse@example.com');
    expect((await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken })).statusCode).toBe(200);
    clock.advance(gateway.config.sessions.refreshReuseGrace + 1);
    await ageRotations(gateway, gateway.config.sessions.refreshReuseGrace + 1);
    const reused = await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken }, device);
    expect(reused.statusCode).toBe(401);

    const events = await eventsOf(user._id);
    expect(events.map((e) => e.type)).toEqual(['sign_in', 'refresh_reuse']);
    expect(events[1]).toMatchObject({ sessionId: sidOf(accessToken), ipAddress: '203.0.113.44' });
    const warning = logLines.find((line) => line.msg === 'refresh token reuse detected: session ended');
    expect(warning).toMatchObject({ level: 40, sessionId: sidOf(accessToken), userId: user._id });
  });

  it("records a code lock-out against the email's account and warns in the log", async () => {
    const { user } = await signIn(gateway.app, 'locked@example.com');
    clock.advance(1);
    const { code } = body(
      await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'locked@example.com' }),
    ).data;
    const lockOut = async (email: string, code: string) => {
      const wrong = String((Number(code) + 1) % 10_000).padStart(4, '0');
      for (let i = 0; i < gateway.config.otp.maxAttempts; i++)
        await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code: wrong }, device);
    };
    await lockOut('locked@example.com', code);
    const events = await eventsOf(user._id);
    // Recorded at the same instant (the clock stands still): compared as a set.
    const sorted = (list: unknown[]) => list.map((item) => JSON.stringify(item)).sort();
    expect(sorted(events.map((e) => [e.type, e.details]))).toEqual(
      sorted([
        ['sign_in', {}],
        ...[4, 3, 2, 1, 0].map((attemptsLeft) => ['sign_in_failed', { attemptsLeft }]),
        ['code_locked', { scope: 'code' }],
      ]),
    );
    // The warning names the account locked out, whose events tell the rest.
    const warnings = logLines.filter((line) => line.msg === 'sign-in locked out after too many wrong codes');
    expect(warnings).toEqual([expect.objectContaining({ level: 40, scope: 'code', userId: user._id })]);

    // An address without an account: no account to name.
    const sent = await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'nobody@example.com' });
    await lockOut('nobody@example.com', body(sent).data.code);
    const last = logLines.filter((line) => line.msg === 'sign-in locked out after too many wrong codes');
    expect(last).toHaveLength(2);
    expect(last[1]).toMatchObject({ scope: 'code' });
    expect(last[1]).not.toHaveProperty('userId');
    // The log lines name neither the email nor the code.
    expect(JSON.stringify(logLines)).not.toContain('locked@example.com');
    expect(JSON.stringify(logLines)).not.toContain('nobody@example.com');
  });

  it("names the account in the warnings of a code's and an address's lock-out, none in an IP's", async () => {
    const strict = capturedLog();
    // One wrong code too many fills the code's, the address's and the IP's budgets at once.
    const limits = {
      OTP_MAX_ATTEMPTS: '3',
      OTP_MAX_FAILURES_PER_EMAIL_PER_DAY: '3',
      OTP_MAX_FAILURES_PER_IP_PER_HOUR: '3',
    };
    const other = await startGateway({ LOG_LEVEL: 'warn', ...limits }, { logStream: strict.logStream });
    onTestFinished(() => other.close());
    const { user } = await signIn(other.app, 'everything-locked@example.com');
    const sent = await post(other.app, '/api/v1/auth/send-otp-email', {
      email: 'everything-locked@example.com',
    });
    const wrong = body(sent).data.code === '0000' ? '0001' : '0000';
    for (let i = 0; i < 3; i++)
      await post(other.app, '/api/v1/auth/verify-otp-email', {
        email: 'everything-locked@example.com',
        code: wrong,
      });

    const warnings = strict.lines.filter(
      (line) => line.msg === 'sign-in locked out after too many wrong codes',
    );
    const byScope = Object.fromEntries(warnings.map((line) => [line.scope, line]));
    expect(Object.keys(byScope).sort()).toEqual(['code', 'email', 'ip']);
    expect(byScope.code).toMatchObject({ userId: user._id });
    expect(byScope.email).toMatchObject({ userId: user._id });
    expect(byScope.ip).not.toHaveProperty('userId');
    expect(JSON.stringify(strict.lines)).not.toContain('everything-locked@example.com');
  });

  it('gives a page whose count agrees with it while events are added and removed', async () => {
    const { user, accessToken } = await signIn(gateway.app, 'busy-log@example.com');
    const { db } = gateway.app;
    let added: string | undefined;
    // Each round changes the log (one event in, then out again) while the page is read.
    const change = async () => {
      if (added === undefined) {
        ({ id: added } = await db
          .insertInto('securityEvents')
          .values({
            type: 'sign_in_failed',
            userId: user._id,
            ipAddress: '203.0.113.9',
            details: '{}',
            createdAt: new Date(),
          })
          .returning('id')
          .executeTakeFirstOrThrow());
      } else {
        await db.deleteFrom('securityEvents').where('id', '=', added).execute();
        added = undefined;
      }
    };
    for (let round = 0; round < 300; round++) {
      const [, listed] = await Promise.all([
        change(),
        gateway.app.inject({
          method: 'GET',
          url: '/api/v1/users/me/security-events',
          headers: bearer(accessToken),
        }),
      ]);
      const { list, pagination } = body(listed).data;
      expect({ round, listed: list.length }).toEqual({ round, listed: pagination.totalItems });
    }
  });
});

describe('when the security log cannot be written', () => {
  it('still ends the sessions it was asked to end: revoke, sign-out of a device, logout; and counts each event lost', async () => {
    const operations = await startOperationsServer({
      host: '127.0.0.1',
      port: 0,
      checks: gateway.app.readiness,
    });
    const lost = async () => {
      const text = await (await fetch(`${operations.url}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith('tessera_security_events_lost_total '));
      return Number(line?.split(' ')[1]);
    };
    const lostBefore = await lost();
    const first = await signIn(gateway.app, 'unlogged@example.com');
    const second = await signIn(gateway.app, 'unlogged@example.com');
    const third = await signIn(gateway.app, 'unlogged@example.com');
    await sql`alter table security_events rename to security_events_away`.execute(gateway.app.db);
    try {
      const revoked = await post(
        gateway.app,
        '/api/v1/auth/revoke-token',
        { refreshToken: first.refreshToken },
        bearer(third.accessToken),
      );
      expect(revoked.statusCode).toBe(200);
      const signedOut = await gateway.app.inject({
        method: 'DELETE',
        url: `/api/v1/auth/sessions/${sidOf(second.accessToken)}`,
        headers: bearer(third.accessToken),
      });
      expect(signedOut.statusCode).toBe(200);
      for (const ended of [first, second]) {
        const after = await gateway.app.inject({
          url: '/api/v1/auth/sessions',
          headers: bearer(ended.accessToken),
        });
        expect(after.statusCode).toBe(401);
      }

      const loggedOut = await post(gateway.app, '/api/v1/auth/logout', {}, bearer(third.accessToken));
      expect(body(loggedOut).data).toEqual({ revokedSessions: 1 });
      const after = await gateway.app.inject({
        url: '/api/v1/auth/sessions',
        headers: bearer(third.accessToken),
      });
      expect(after.statusCode).toBe(401);
      const unrecorded = logLines.filter((line) => line.msg === 'could not record a security event');
      expect(unrecorded.map((line) => line.event)).toEqual(['session_revoked', 'session_revoked', 'logout']);
      expect((await lost()) - lostBefore).toBe(3);
    } finally {
      await sql`alter table security_events_away rename to security_events`.execute(gateway.app.db);
      await operations.close();
    }
  });
});
