import { setTimeout as sleep } from 'node:timers/promises';
import { DependencyUnavailableError } from '@tessera/contracts';
import { createTestDatabase, startTcpProxy, type TcpProxy, type TestDatabase } from '@tessera/testing';
import Fastify, { type FastifyInstance } from 'fastify';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, inject, it } from 'vitest';
import type { Database } from '../src/database.ts';
import db from '../src/plugins/db.ts';

// A statement Postgres leaves unanswered (a frozen host, a partition: the connection stays open) fails
// once DATABASE_STATEMENT_TIMEOUT and 1 s have passed and Postgres answers nothing on the readiness
// probe's connection either, so that its request answers 503 instead of waiting for Postgres; while
// Postgres answers, a statement waits (a commit held by a synchronous standby, the deletion sweep's
// long statements). Postgres is reached through a proxy that holds what either side sends.

let database: TestDatabase;
let proxy: TcpProxy;
let app: FastifyInstance;
beforeAll(async () => {
  database = await createTestDatabase();
  proxy = await startTcpProxy(database.url);
  app = Fastify();
  // One connection, so that each test meets the one the last released (or its replacement).
  await app.register(db, { url: proxy.through(database.url), poolSize: 1, statementTimeout: 1 });
  await app.ready();
});
afterEach(() => proxy.thaw());
afterAll(async () => {
  await app?.close();
  await proxy?.close();
  await database?.drop();
});

/** The backend that answers, on `on`'s connection. */
const backend = async (on: Kysely<Database>) =>
  (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(on)).rows[0]?.pid;
const unanswered = { cause: expect.objectContaining({ message: expect.stringMatching(/answered neither/) }) };

it('fails a statement left unanswered, with the probe unanswered too, as an outage; the next runs on another connection', async () => {
  const before = await backend(app.db);
  proxy.freeze();
  const failed = backend(app.db);
  await expect(failed).rejects.toBeInstanceOf(DependencyUnavailableError);
  await expect(failed).rejects.toMatchObject(unanswered);
  proxy.thaw();
  const after = await backend(app.db);
  expect(after).toEqual(expect.any(Number));
  expect(after).not.toBe(before);
});

it('fails a transaction whose statement went unanswered, its rollback with the same cause', async () => {
  const transaction = app.db.transaction().execute(async (trx) => {
    proxy.freeze();
    return backend(trx);
  });
  await expect(transaction).rejects.toMatchObject(unanswered);
});

it('lets a statement run past its deadline while Postgres answers on another connection, on the same connection', async () => {
  const before = await backend(app.db);
  // As the deletion sweep's transaction: a statement_timeout of its own, past the deadline (2 s).
  const slept = await app.db.transaction().execute(async (trx) => {
    await sql`set local statement_timeout = '10min'`.execute(trx);
    await sql`select pg_sleep(3)`.execute(trx);
    return backend(trx);
  });
  expect(slept).toBe(before);
});

it('waits on while Postgres answers the probe, and cuts once it goes silent', async () => {
  const statement = app.db.transaction().execute(async (trx) => {
    await sql`set local statement_timeout = '10min'`.execute(trx);
    return sql`select pg_sleep(20)`.execute(trx);
  });
  // Past the first deadline (2 s), at which Postgres answered the probe.
  await sleep(3000);
  proxy.freeze();
  await expect(statement).rejects.toMatchObject(unanswered);
});

it('takes a probe answered with an error for no silence: the statement waits on', async () => {
  const admin = new pg.Client({ connectionString: inject('postgresUrl') });
  await admin.connect();
  const name = new URL(database.url).pathname.slice(1);
  try {
    const slept = app.db.transaction().execute(async (trx) => {
      await sql`set local statement_timeout = '10min'`.execute(trx);
      const pid = await backend(trx);
      // The probe's connection ends, and a new one is refused (as with too many clients).
      await admin.query(`alter database ${admin.escapeIdentifier(name)} allow_connections false`);
      await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> $2',
        [name, pid],
      );
      await sql`select pg_sleep(4)`.execute(trx);
      return pid;
    });
    expect(await slept).toEqual(expect.any(Number));
  } finally {
    await admin.query(`alter database ${admin.escapeIdentifier(name)} allow_connections true`);
    await admin.end();
  }
});

it("leaves a statement stuck behind a lock to Postgres's statement_timeout, on the same connection", async () => {
  const before = await backend(app.db);
  const holder = new pg.Client({ connectionString: database.url });
  await holder.connect();
  try {
    await holder.query('begin; lock table users in access exclusive mode');
    const waited = app.db.selectFrom('users').select('id').execute();
    await expect(waited).rejects.toMatchObject({ cause: { code: '57014' } });
  } finally {
    await holder.end();
  }
  expect(await backend(app.db)).toBe(before);
});

const lostOnTheWay = {
  cause: expect.objectContaining({ message: expect.stringMatching(/runs no statement on this connection/) }),
};

it("cuts a statement whose connection was lost on the way while Postgres answers, and ends its backend, which lets go of its transaction's locks", async () => {
  const before = await backend(app.db);
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  try {
    const lost = app.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(4242)`.execute(trx);
      // A NAT or firewall forgets every connection open now, the probe's too: nothing arrives on them.
      proxy.abandon();
      // The readiness probe finds its own lost, and answers again over a new connection...
      await expect(app.postgresAnswers()).rejects.toBeInstanceOf(DependencyUnavailableError);
      await expect(app.postgresAnswers()).resolves.toEqual({ readOnly: false });
      // ...while the pool's connection would wait for ever (until the kernel gives up, ~15 minutes).
      return backend(trx);
    });
    await expect(lost).rejects.toBeInstanceOf(DependencyUnavailableError);
    await expect(lost).rejects.toMatchObject(lostOnTheWay);
    // Its backend ended: the lock is free now, not after idle_in_transaction_session_timeout (60 s).
    const { rows } = await admin.query<{ pid: number | null }>(
      'select pid from pg_stat_activity where pid = $1',
      [before],
    );
    expect(rows).toEqual([]);
    expect((await admin.query('select pg_try_advisory_lock(4242) as free')).rows[0]).toEqual({ free: true });
  } finally {
    await admin.end();
  }
  const after = await backend(app.db);
  expect(after).toEqual(expect.any(Number));
  expect(after).not.toBe(before);
});

it('cuts a statement whose connection was lost on the way when its backend is gone too (a failover behind one address)', async () => {
  const before = await backend(app.db);
  proxy.abandon();
  await expect(app.postgresAnswers()).rejects.toBeInstanceOf(DependencyUnavailableError);
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  await admin.query('select pg_terminate_backend($1)', [before]);
  await admin.end();
  await expect(backend(app.db)).rejects.toMatchObject(lostOnTheWay);
  expect(await backend(app.db)).toEqual(expect.any(Number));
});
