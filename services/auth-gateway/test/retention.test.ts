import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, capturedLog, manualClock, post, signIn, startGateway, type TestGateway } from './helpers.ts';

const clock = manualClock(new Date('2026-11-23T10:00:00.000Z'));
const { lines: logLines, logStream } = capturedLog();
let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway(
    {
      LOG_LEVEL: 'info',
      RETENTION_SWEEP_INTERVAL: '1',
      SESSION_RETENTION: '3600',
      SECURITY_EVENT_RETENTION: '7200',
      REFRESH_TOKEN_TTL: '86400',
    },
    { clock, logStream },
  );
  await gateway.app.ready();
});
afterAll(() => gateway.close());

const count = async (table: string, where = sql`true`) =>
  Number(
    (
      await sql<{ n: string }>`select count(*) as n from ${sql.table(table)} where ${where}`.execute(
        gateway.app.db,
      )
    ).rows[0]?.n,
  );

describe('the retention sweep', () => {
  it('warns at start that security events are kept for less than 30 days, in seconds', () => {
    expect(logLines.find((line) => line.level === 40 && line.securityEventRetention === 7200)?.msg).toBe(
      'security events are deleted 7200 seconds after they happen (SECURITY_EVENT_RETENTION is in seconds)',
    );
  });

  it('deletes ended and expired sessions with their tokens after SESSION_RETENTION, and old events after SECURITY_EVENT_RETENTION', async () => {
    const gone = await signIn(gateway.app, 'short-lived@example.com');
    await post(gateway.app, '/api/v1/auth/logout', {}, bearer(gone.accessToken));
    const kept = await signIn(gateway.app, 'long-lived@example.com');
    const sessionsBefore = await count('sessions');
    const eventsBefore = await count('security_events');
    expect(sessionsBefore).toBe(2);

    // An hour and a bit later: the ended session is past SESSION_RETENTION, the other is still active.
    clock.advance(3601);
    await vi.waitFor(async () => expect(await count('sessions')).toBe(1), { timeout: 5000 });
    expect(await count('refresh_tokens')).toBe(1);
    const active = await gateway.app.inject({
      url: '/api/v1/auth/sessions',
      headers: bearer(kept.accessToken),
    });
    expect(active.json().data.pagination.totalItems).toBe(1);
    // A refresh now: the first token is rotated (kept until it expires, for reuse detection), and the
    // session and its new token expire a day (REFRESH_TOKEN_TTL) from now.
    const refreshed = await post(gateway.app, '/api/v1/auth/refresh-token', {
      refreshToken: kept.refreshToken,
    });
    expect(refreshed.statusCode).toBe(200);
    expect(await count('refresh_tokens')).toBe(2);
    // The events are younger than SECURITY_EVENT_RETENTION and stay, without their session.
    expect(await count('security_events')).toBe(eventsBefore);

    // Past SECURITY_EVENT_RETENTION every event of that hour goes.
    clock.advance(3600);
    await vi.waitFor(async () => expect(await count('security_events')).toBe(0), { timeout: 5000 });
    // Each run that deleted some says how many, and up to when.
    await vi.waitFor(
      () =>
        expect(
          logLines.filter((line) => line.msg === 'security events past SECURITY_EVENT_RETENTION deleted'),
        ).toEqual([
          expect.objectContaining({
            level: 30,
            deleted: eventsBefore,
            before: new Date(clock.now().getTime() - 7_200_000).toISOString(),
          }),
        ]),
      { timeout: 5000 },
    );

    // A day later the rotated token expired more than SESSION_RETENTION ago and goes; the session and
    // its current token expired exactly SESSION_RETENTION ago and stay.
    clock.advance(86_400);
    await vi.waitFor(async () => expect(await count('refresh_tokens')).toBe(1), { timeout: 5000 });
    expect(await count('sessions')).toBe(1);

    // A second more and the expired session goes, with its token.
    clock.advance(1);
    await vi.waitFor(async () => expect(await count('sessions')).toBe(0), { timeout: 5000 });
    expect(await count('refresh_tokens')).toBe(0);
  });
});
