import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { bearer, capturedLog, signIn, startGateway, type TestGateway } from './helpers.ts';

// A database set up as DBAs and managed services set theirs (ALTER DATABASE … SET, as ALTER ROLE
// would): the gateway answers as on the defaults, or refuses to start saying what to set; never 500.

let gateway: TestGateway | undefined;
let app: Awaited<ReturnType<typeof buildApp>> | undefined;
afterEach(async () => {
  await app?.close();
  await gateway?.close();
  app = gateway = undefined;
});

/** A gateway built on a database whose settings are `settings`, applied before any of its connections. */
async function gatewayWith(settings: Record<string, string>) {
  gateway = await startGateway({ LOG_LEVEL: 'warn' });
  const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(gateway.app.db);
  const admin = new pg.Client({ connectionString: gateway.config.database.url });
  await admin.connect();
  for (const [setting, value] of Object.entries(settings))
    await admin.query(`alter database "${rows[0]?.name}" set ${setting} = ${admin.escapeLiteral(value)}`);
  await admin.end();
  await gateway.app.close();
  const log = capturedLog();
  const built = buildApp(gateway.config, { checkResponses: true, logStream: log.logStream });
  return { built, log };
}

it.each([
  [
    'DateStyle',
    'SQL, DMY',
    /writes dates as 'SQL, DMY' \(DateStyle\).*alter role "[^"]+" set datestyle = 'ISO, MDY';/,
  ],
  [
    'default_transaction_isolation',
    'serializable',
    /runs transactions as 'serializable'.*alter role "[^"]+" set default_transaction_isolation = 'read committed';/,
  ],
  ['default_transaction_isolation', 'repeatable read', /runs transactions as 'repeatable read'/],
])('refuses to start, saying what to set, on a database with %s = %s', async (setting, value, message) => {
  // Under them every sign-in answered 500 after writing its rows (dates read as null), or concurrent
  // profile updates, sign-ins and refreshes did (could not serialize access).
  await expect((await gatewayWith({ [setting]: value })).built).rejects.toThrow(message);
});

it.each([
  ['DateStyle', 'ISO, DMY'],
  ['default_transaction_isolation', 'read uncommitted'],
])('starts, and signs in, on a database with %s = %s', async (setting, value) => {
  // ISO with the day first reads the same; Postgres runs read uncommitted as read committed.
  app = await (await gatewayWith({ [setting]: value })).built;
  const { user } = await signIn(app, 'workable@example.com');
  expect(Date.parse(user.createdAt)).toBeGreaterThan(0);
});

it('answers a statement that waited out lock_timeout 503 with Retry-After, as one that waited out statement_timeout', async () => {
  const { built } = await gatewayWith({ lock_timeout: '500ms' });
  app = await built;
  const { accessToken } = await signIn(app, 'lock@example.com');
  const locker = new pg.Client({ connectionString: gateway?.config.database.url });
  await locker.connect();
  try {
    await locker.query('begin; lock table sessions in access exclusive mode');
    const listed = await app.inject({
      method: 'GET',
      url: '/api/v1/auth/sessions',
      headers: bearer(accessToken),
    });
    expect(listed.statusCode).toBe(503);
    expect(listed.headers['retry-after']).toBe('5');
  } finally {
    await locker.query('rollback');
    await locker.end();
  }
  const again = await app.inject({
    method: 'GET',
    url: '/api/v1/auth/sessions',
    headers: bearer(accessToken),
  });
  expect(again.statusCode).toBe(200);
});

it('warns at start when Postgres ends idle connections before the pool lets them go', async () => {
  const { built, log } = await gatewayWith({ idle_session_timeout: '5s' });
  app = await built;
  expect(log.lines).toContainEqual(
    expect.objectContaining({
      level: 40,
      msg: expect.stringMatching(/^Postgres ends idle connections before the pool lets them go/),
      idleSessionTimeoutMs: 5000,
      fix: expect.stringMatching(/^alter role "[^"]+" set idle_session_timeout = 0;$/),
    }),
  );
});
