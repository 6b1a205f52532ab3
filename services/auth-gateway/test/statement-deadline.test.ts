import { setTimeout as sleep } from 'node:timers/promises';
import { DependencyUnavailableError } from '@tessera/contracts';
import { createTestDatabase, startTcpProxy, type TcpProxy, type TestDatabase } from '@tessera/testing';
import Fastify, { type FastifyInstance } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { Database } from '../src/database.ts';
import db from '../src/plugins/db.ts';

// A statement Postgres leaves unanswered (a frozen host, a partition: the connection stays open) fails
// once DATABASE_STATEMENT_TIMEOUT and 3 s have passed, so that its request answers 503 instead of
// waiting for Postgres; a transaction that set its own statement_timeout, as the deletion sweep's
// 10 minutes, waits. Postgres is reached through a proxy that holds what either side sends.

const DEADLINE_MS = 1000 + 3000;

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

const one = async (on: Kysely<Database>) => (await sql<{ one: number }>`select 1 as one`.execute(on)).rows;

it('fails a statement left unanswered past its deadline as an outage, and serves the next on another connection', async () => {
  proxy.freeze();
  await expect(one(app.db)).rejects.toBeInstanceOf(DependencyUnavailableError);
  proxy.thaw();
  expect(await one(app.db)).toEqual([{ one: 1 }]);
});

it("waits in a transaction that set its own statement_timeout; the connection's next statement has its deadline again", async () => {
  await app.db.transaction().execute(async (trx) => {
    await sql`set local statement_timeout = '10min'`.execute(trx);
    proxy.freeze();
    const answer = one(trx);
    await sleep(DEADLINE_MS + 1000);
    proxy.thaw();
    expect(await answer).toEqual([{ one: 1 }]);
  });
  proxy.freeze();
  await expect(one(app.db)).rejects.toBeInstanceOf(DependencyUnavailableError);
});

it('fails a transaction whose statement passed its deadline as an outage, and serves the next', async () => {
  const transaction = app.db.transaction().execute(async (trx) => {
    proxy.freeze();
    return one(trx);
  });
  await expect(transaction).rejects.toBeInstanceOf(DependencyUnavailableError);
  proxy.thaw();
  expect(await one(app.db)).toEqual([{ one: 1 }]);
});
