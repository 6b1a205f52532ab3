import { migrateToLatest } from '@tessera/infra';
import { createTestDatabase } from '@tessera/testing';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { generateSigningKeyPem } from '../src/modules/tokens/keys.ts';
import {
  bearer,
  body,
  capturedLog,
  envBeside,
  post,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway();
});
afterAll(() => gateway.close());

describe('health', () => {
  it('is live and ready while Postgres and Redis answer', async () => {
    const live = await gateway.app.inject({ method: 'GET', url: '/health/live' });
    expect(body(live)).toMatchObject({ isSuccess: true, statusCode: 200, data: { status: 'ok' } });
    const ready = await gateway.app.inject({ method: 'GET', url: '/health/ready' });
    expect(body(ready)).toMatchObject({ isSuccess: true, data: { postgres: 'up', redis: 'up' } });
  });
});

describe('Postgres connections', () => {
  it("are at most DATABASE_POOL_SIZE and the probe's, however many requests come at once, and end a transaction left idle", async () => {
    const small = await startGateway({ DATABASE_POOL_SIZE: '2' });
    const admin = new pg.Client({ connectionString: small.config.database.url });
    await admin.connect();
    try {
      const sendCodes = Array.from({ length: 20 }, (_, i) =>
        post(small.app, '/api/v1/auth/send-otp-email', { email: `pool-${i}@example.com` }),
      );
      const listings = Array.from({ length: 20 }, () =>
        small.app.inject({ method: 'GET', url: '/api/v1/users/me/security-events' }),
      );
      let most = 0;
      const watching = (async () => {
        for (let i = 0; i < 50; i++) {
          const { rows } = await admin.query(
            `select count(*)::int as n from pg_stat_activity
             where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'`,
          );
          most = Math.max(most, rows[0].n);
        }
      })();
      const verifies = Array.from({ length: 20 }, (_, i) =>
        post(small.app, '/api/v1/auth/verify-otp-email', { email: `pool-${i}@example.com`, code: '0000' }),
      );
      await Promise.all([...sendCodes, ...listings, ...verifies, watching]);
      expect(most).toBeGreaterThan(1);
      // The pool's, and the readiness probe's own.
      expect(most).toBeLessThanOrEqual(2 + 1);
      const setting = await small.app.db.executeQuery(
        sql`show idle_in_transaction_session_timeout`.compile(small.app.db),
      );
      expect(setting.rows).toEqual([{ idleInTransactionSessionTimeout: '1min' }]);
    } finally {
      await admin.end();
      await small.close();
    }
  });
});

describe('a statement stuck behind a lock', () => {
  it('answers 503 after DATABASE_STATEMENT_TIMEOUT, and its connection serves the next request', async () => {
    const small = await startGateway({ DATABASE_POOL_SIZE: '1', DATABASE_STATEMENT_TIMEOUT: '1' });
    const operator = new pg.Client({ connectionString: small.config.database.url });
    await operator.connect();
    try {
      const { accessToken } = await signIn(small.app, 'locked-out@example.com');
      await operator.query('begin');
      await operator.query('lock table sessions in access exclusive mode');

      const list = await small.app.inject({ url: '/api/v1/auth/sessions', headers: bearer(accessToken) });
      expect(list.statusCode).toBe(503);
      expect(body(list).errors).toEqual(['Service unavailable']);
      expect(list.headers['retry-after']).toBe('5');
      // The pool's only connection is free again: what needs no locked table is answered.
      const me = await small.app.inject({ url: '/api/v1/users/me', headers: bearer(accessToken) });
      expect(me.statusCode).toBe(200);

      await operator.query('rollback');
      const again = await small.app.inject({ url: '/api/v1/auth/sessions', headers: bearer(accessToken) });
      expect(again.statusCode).toBe(200);
    } finally {
      await operator.end();
      await small.close();
    }
  });
});

describe('a pool whose every connection is in use', () => {
  it('answers 503 SERVER_BUSY after 3 s, warns once for many, and stays ready: Postgres answers', async () => {
    const { lines, logStream } = capturedLog();
    const small = await startGateway({ DATABASE_POOL_SIZE: '1', LOG_LEVEL: 'warn' }, { logStream });
    const operator = new pg.Client({ connectionString: small.config.database.url });
    await operator.connect();
    try {
      const { accessToken } = await signIn(small.app, 'crowded@example.com');
      await operator.query('begin');
      await operator.query('lock table sessions in access exclusive mode');
      // The pool's only connection waits for the lock; the requests after it wait for the connection.
      const stuck = small.app.inject({ url: '/api/v1/auth/sessions', headers: bearer(accessToken) });
      await vi.waitFor(
        async () => {
          // In a transaction Postgres shows one snapshot of its activity until told to take another.
          await operator.query('select pg_stat_clear_snapshot()');
          const { rows } = await operator.query(
            "select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
          );
          expect(rows).toHaveLength(1);
        },
        { timeout: 5000 },
      );

      const answers = await Promise.all(
        [1, 2].map(() => small.app.inject({ url: '/api/v1/users/me', headers: bearer(accessToken) })),
      );
      for (const busy of answers) {
        expect(busy.statusCode).toBe(503);
        expect(body(busy).errors).toEqual([
          'Service unavailable',
          'This gateway has more requests than it can serve; try again',
        ]);
        expect(busy.headers['tessera-error-code']).toBe('SERVER_BUSY');
        expect(busy.headers['retry-after']).toBe('5');
      }
      const warnings = lines.filter(({ msg }) => String(msg).startsWith('postgres pool exhausted'));
      expect(warnings).toEqual([expect.objectContaining({ refused: 1, poolSize: 1 })]);
      expect(lines.filter(({ msg }) => msg === 'postgres unavailable')).toEqual([]);

      const ready = await small.app.inject({ method: 'GET', url: '/health/ready' });
      expect(body(ready)).toMatchObject({ statusCode: 200, data: { postgres: 'up', redis: 'up' } });

      await operator.query('rollback');
      expect((await stuck).statusCode).toBe(200);
      const served = await small.app.inject({ url: '/api/v1/users/me', headers: bearer(accessToken) });
      expect(served.statusCode).toBe(200);
    } finally {
      await operator.end();
      await small.close();
    }
  });
});

describe('when Redis goes away', () => {
  it('is not ready, answers 503 instead of hanging, and recovers when Redis is back', async () => {
    const { redis } = gateway.app;
    redis.disconnect();
    await vi.waitFor(() => expect(redis.status).toBe('end'), { timeout: 5000 });
    const ready = await gateway.app.inject({ method: 'GET', url: '/health/ready' });
    expect(ready.statusCode).toBe(503);
    expect(body(ready).errors).toEqual(['Service unavailable', 'redis is down']);
    expect(ready.headers['retry-after']).toBe('5');

    const send = await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'zoe@example.com' });
    expect(send.statusCode).toBe(503);
    expect(body(send)).toMatchObject({ isSuccess: false, data: null, errors: ['Service unavailable'] });
    expect(send.headers['retry-after']).toBe('5');

    await redis.connect();
    expect((await gateway.app.inject({ method: 'GET', url: '/health/ready' })).statusCode).toBe(200);
  });
});

describe('when Postgres goes away during a sign-in', () => {
  it('answers 503 and gives the code back for a retry', async () => {
    // A real outage of this file's database: no new connections, and the open ones cut.
    const url = new URL(gateway.config.database.url);
    const database = url.pathname.slice(1);
    url.pathname = '/postgres';
    const admin = new pg.Client({ connectionString: url.toString() });
    await admin.connect();
    const name = admin.escapeIdentifier(database);
    const email = 'yan@example.com';
    try {
      const { code } = body(await post(gateway.app, '/api/v1/auth/send-otp-email', { email })).data;
      await admin.query(`alter database ${name} allow_connections false`);
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1', [
        database,
      ]);
      const failed = await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code });
      expect(failed.statusCode).toBe(503);
      expect(body(failed).errors).toEqual(['Service unavailable']);
      expect(failed.headers['retry-after']).toBe('5');

      await admin.query(`alter database ${name} allow_connections true`);
      expect((await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code })).statusCode).toBe(
        200,
      );
    } finally {
      await admin.query(`alter database ${name} allow_connections true`).catch(() => undefined);
      await admin.end();
    }
  });
});

/** Another gateway, beside this file's, on the database at `databaseUrl`; its log lines (debug and up) as objects. */
async function gatewayOn(databaseUrl: string) {
  const { lines, logStream } = capturedLog();
  const config = loadConfig(
    envBeside(gateway, {
      DATABASE_URL: databaseUrl,
      LOG_LEVEL: 'debug',
      JWT_PRIVATE_KEY: generateSigningKeyPem(),
    }),
  );
  const app = await buildApp(config, { logStream });
  return { app, lines, ready: () => app.inject({ method: 'GET', url: '/health/ready' }) };
}

const SCHEMA_BEHIND = ['Service unavailable', 'postgres schema is behind: run pnpm db:migrate'];

describe('on tables Postgres would not vacuum', () => {
  it('warns at start, naming them', async () => {
    const database = await createTestDatabase();
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    // Postgres keeps the value as written: off, 0 and false all turn it off.
    await admin.query('alter table refresh_tokens set (autovacuum_enabled = off)');
    await admin.query('alter table security_events set (autovacuum_enabled = 0)');
    await admin.end();
    const { app, lines } = await gatewayOn(database.url);
    try {
      const warnings = lines.filter((line) => /autovacuum is disabled/.test(String(line.msg)));
      expect(warnings).toEqual([
        expect.objectContaining({ level: 40, tables: ['refresh_tokens', 'security_events'] }),
      ]);
    } finally {
      await app.close();
      await database.drop();
    }
  });
});

describe('on a Postgres that refuses writes (a standby, before or after a failover)', () => {
  it('is not ready and says why, answers 503 to what writes, and recovers once its connections reach a server that takes writes', async () => {
    const database = await createTestDatabase();
    const url = new URL(database.url);
    const name = url.pathname.slice(1);
    url.pathname = '/postgres';
    const admin = new pg.Client({ connectionString: url.toString() });
    await admin.connect();
    const readOnly = (on: boolean) =>
      admin.query(
        `alter database ${admin.escapeIdentifier(name)} ${on ? 'set default_transaction_read_only = on' : 'reset default_transaction_read_only'}`,
      );
    await readOnly(true);
    const { app, lines, ready } = await gatewayOn(database.url);
    try {
      const before = await ready();
      expect(before.statusCode).toBe(503);
      expect(body(before).errors).toEqual([
        'Service unavailable',
        'postgres is read-only (a standby?): point DATABASE_URL at the primary',
      ]);

      const email = 'standby@example.com';
      const { code } = body(await post(app, '/api/v1/auth/send-otp-email', { email })).data;
      const refused = await post(app, '/api/v1/auth/verify-otp-email', { email, code });
      expect(refused.statusCode).toBe(503);
      expect(body(refused)).toMatchObject({ errors: ['Service unavailable'] });
      expect(refused.headers['retry-after']).toBe('5');
      expect(lines.filter((line) => line.msg === 'unhandled error')).toEqual([]);

      // The primary again: new connections (a failover's repoint makes them) take writes.
      await readOnly(false);
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1', [name]);
      await vi.waitFor(async () => expect((await ready()).statusCode).toBe(200), { timeout: 5000 });
      // The code was given back: the user signs in with it.
      await vi.waitFor(
        async () =>
          expect((await post(app, '/api/v1/auth/verify-otp-email', { email, code })).statusCode).toBe(200),
        { timeout: 5000 },
      );
    } finally {
      await app.close();
      await readOnly(false).catch(() => undefined);
      await admin.end();
      await database.drop();
    }
  });
});

describe('on a database not migrated', () => {
  it('is not ready and says why, warns once at start without a stack, and is ready once migrated', async () => {
    const database = await createTestDatabase({ migrated: false });
    const { app, lines, ready } = await gatewayOn(database.url);
    try {
      const before = await ready();
      expect(before.statusCode).toBe(503);
      expect(body(before).errors).toEqual(SCHEMA_BEHIND);
      expect(before.headers['retry-after']).toBe('5');
      // The sweeps' first runs, at start: skipped while the tables are missing, not an error.
      const skipped = () =>
        lines.filter((line) => line.msg === 'sweep skipped: the database lacks migrations');
      await vi.waitFor(
        () =>
          expect(
            skipped()
              .map((line) => line.sweep)
              .sort(),
          ).toEqual(['account_deletion', 'retention']),
        { timeout: 5000 },
      );
      const warnings = lines.filter((line) => /postgres schema/.test(String(line.msg)));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({
        level: 40,
        msg: expect.stringMatching(/^postgres schema is behind: run pnpm db:migrate\b/),
      });
      expect(warnings[0]).not.toHaveProperty('err');

      // Traffic that reaches it all the same (no readiness in front): "not now", not a server error.
      const email = 'early@example.com';
      const { code } = body(await post(app, '/api/v1/auth/send-otp-email', { email })).data;
      const early = await post(app, '/api/v1/auth/verify-otp-email', { email, code });
      expect(early.statusCode).toBe(503);
      expect(early.headers['retry-after']).toBe('5');
      expect(lines.filter((line) => Number(line.level) >= 50)).toEqual([]);

      await migrateToLatest(database.url);
      const after = await ready();
      expect(after.statusCode).toBe(200);
      expect(body(after).data).toEqual({ postgres: 'up', redis: 'up' });
      // The code was given back: the user signs in with it once the schema is there.
      expect((await post(app, '/api/v1/auth/verify-otp-email', { email, code })).statusCode).toBe(200);
    } finally {
      await app.close();
      await database.drop();
    }
  });
});

describe('on a database without the newest migration', () => {
  it('is not ready until it has every migration of this gateway (one it does not know is fine), then stays ready', async () => {
    const database = await createTestDatabase();
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    const gatewayB = await gatewayOn(database.url).catch(async (error) => {
      await admin.end();
      throw error;
    });
    try {
      // As if the migration job had not run yet, and a newer gateway's migration had.
      const { rows } = await admin.query<{ name: string; timestamp: string }>(
        'delete from kysely_migration where name = (select max(name) from kysely_migration) returning *',
      );
      await admin.query('insert into kysely_migration values ($1, $2)', [
        '9999_12_31_000100_from_a_newer_gateway',
        new Date().toISOString(),
      ]);
      const before = await gatewayB.ready();
      expect(before.statusCode).toBe(503);
      expect(body(before).errors).toEqual(SCHEMA_BEHIND);

      await admin.query('insert into kysely_migration values ($1, $2)', [rows[0]?.name, rows[0]?.timestamp]);
      expect(body(await gatewayB.ready())).toMatchObject({ statusCode: 200, errors: [] });

      // A migrated schema does not go back: once ready, the probe no longer reads kysely_migration.
      await admin.query('delete from kysely_migration');
      expect(body(await gatewayB.ready())).toMatchObject({ statusCode: 200, errors: [] });
    } finally {
      await gatewayB.app.close();
      await admin.end();
      await database.drop();
    }
  });
});
