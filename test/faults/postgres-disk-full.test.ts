import { mountSmallDisk, type SmallDisk } from '@tessera/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startOnPrivatePostgres, type Tessera } from './tessera.ts';

// Postgres out of disk: Tessera's tables on a 2 MB filesystem of their own (a tmpfs, whose mount
// takes root, as CI runs the tests), filled up. A sign-in then needs room Postgres cannot get
// (SQLSTATE 53100): the enveloped 503 with Retry-After of an outage, not a 500; the log says why in
// one warning; the code is given back and signs in once there is room again. A sign-out, which needs
// room only for its security event, stands without it, as when the event's row is refused.

let fault: Awaited<ReturnType<typeof startOnPrivatePostgres>>;
let tessera: Tessera;
let admin: pg.Client;
let disk: SmallDisk | undefined;

beforeAll(async () => {
  fault = await startOnPrivatePostgres();
  ({ tessera } = fault);
  tessera.startMailer();
  disk = await mountSmallDisk('2m', 'postgres');
  admin = new pg.Client({ connectionString: fault.databaseUrl });
  await admin.connect();
  await admin.query(`create tablespace small location '${disk.path}'`);
  // Every table and index of the database, empty yet: a sign-in must extend them.
  await admin.query('alter table all in tablespace pg_default set tablespace small');
  await admin.query('alter index all in tablespace pg_default set tablespace small');
});
afterAll(async () => {
  await admin?.end();
  await fault?.remove();
  await disk?.remove();
});

const signIn = (email: string, code: string) =>
  tessera.call('POST', '/api/v1/auth/verify-otp-email', { email, code });

/** Postgres's error once `statement` found no room, run as often as it finds some. */
async function untilFull(statement: string): Promise<unknown> {
  for (;;) {
    const error = await admin.query(statement).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (error) return error;
  }
}

it('answers 503 to what finds no room, says why, lets a sign-out stand without its event, and signs in with the same code after', {
  timeout: 60_000,
}, async () => {
  // Someone signed in on two devices, one of them since signed out (the ended sessions' index has a page).
  const owner = 'owner@example.com';
  const first = await signIn(owner, await tessera.codeByEmail(owner));
  const second = await signIn(owner, await tessera.codeByEmail(owner));
  const revoke = ({ json }: typeof first) =>
    tessera.call(
      'POST',
      '/api/v1/auth/revoke-token',
      { refreshToken: json.data.refreshToken },
      json.data.accessToken,
    );
  expect((await revoke(first)).status).toBe(200);
  const email = 'disk-full@example.com';
  const code = await tessera.codeByEmail(email);

  await admin.query('create table filler (b bytea) tablespace small');
  expect(
    await untilFull(
      "insert into filler select decode(repeat('ab', 8000), 'hex') from generate_series(1, 20)",
    ),
  ).toMatchObject({ code: '53100' });
  // The security events' pages full too, with rows the size of a sign-out's: its event finds no room.
  await admin.query('alter table security_events set (autovacuum_enabled = false)');
  for (let refused = 0; refused < 10; refused++)
    expect(
      await untilFull(
        `insert into security_events (type, user_id, session_id, ip_address, user_agent, details, created_at)
         select 'session_revoked', user_id, session_id, ip_address, user_agent, '{"via":"refresh_token"}', created_at
           from security_events where type = 'sign_in' limit 1`,
      ),
    ).toMatchObject({ code: '53100' });

  const refused = await signIn(email, code);
  expect(refused.status).toBe(503);
  expect(refused.json).toMatchObject({ isSuccess: false, statusCode: 503, data: null });
  expect(refused.json.errors).toEqual(['Service unavailable']);
  expect(refused.headers.get('retry-after')).toBe('5');
  expect(refused.headers.get('tessera-error-code')).toBe('DEPENDENCY_UNAVAILABLE');
  // Reads go on, and a full disk is no gateway's to mend: readiness keeps the gateway in service.
  expect((await fetch(`${tessera.baseUrl}/health/ready`)).status).toBe(200);
  expect(tessera.gateway.logLines().filter((line) => line.msg === 'unhandled error')).toEqual([]);
  expect(tessera.gateway.logLines().filter((line) => line.msg === 'postgres unavailable')).toEqual([
    expect.objectContaining({
      level: 40,
      code: '53100',
      reason: expect.stringMatching(/No space left on device/),
    }),
  ]);

  // A sign-out needs no new page but its event's: it stands without its record, which is logged.
  expect((await revoke(second)).status).toBe(200);
  const me = await tessera.call('GET', '/api/v1/users/me', undefined, second.json.data.accessToken);
  expect(me.status).toBe(401);
  expect(
    tessera.gateway.logLines().filter((line) => line.msg === 'could not record a security event'),
  ).toEqual([expect.objectContaining({ level: 50, event: 'session_revoked' })]);

  await admin.query('drop table filler');
  const signedIn = await signIn(email, code);
  expect(signedIn.status).toBe(200);
  expect(signedIn.json.data.refreshToken).toEqual(expect.any(String));
});
