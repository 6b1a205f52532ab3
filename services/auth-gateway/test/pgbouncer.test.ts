import { createTestDatabase, startPgBouncer, type TestDatabase } from '@tessera/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capturedLog, signIn, startGateway } from './helpers.ts';

// Behind PgBouncer (session pooling), which passes on no connection settings of its own accord.
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database?.drop());

const TIMEOUTS_UNAPPLIED =
  'Postgres does not apply the timeouts the gateway asked for (a pooler ignores them?): set them on its role';

describe('a PgBouncer that refuses the connection settings', () => {
  it('stops the start, saying what to set', async () => {
    const bouncer = await startPgBouncer(database.url);
    try {
      await expect(startGateway({ DATABASE_URL: bouncer.urlFor(database.url) })).rejects.toThrow(
        /^Postgres refused the connection's settings \(unsupported startup parameter: statement_timeout\): behind PgBouncer, list them in its ignore_startup_parameters and set them on the gateway's role/,
      );
    } finally {
      await bouncer.stop();
    }
  });
});

describe('a PgBouncer that ignores them', () => {
  const ignoring = { ignore_startup_parameters: 'statement_timeout, idle_in_transaction_session_timeout' };

  it('serves, and warns with the statements that set the timeouts on the role', async () => {
    const bouncer = await startPgBouncer(database.url, ignoring);
    const { lines, logStream } = capturedLog();
    const gateway = await startGateway(
      { DATABASE_URL: bouncer.urlFor(database.url), LOG_LEVEL: 'warn', DATABASE_STATEMENT_TIMEOUT: '7' },
      { logStream },
    );
    try {
      expect(lines.find((line) => line.msg === TIMEOUTS_UNAPPLIED)).toMatchObject({
        settings: {
          statement_timeout: { wanted: 7000, ms: 0 },
          idle_in_transaction_session_timeout: { wanted: 60_000, ms: 0 },
        },
        fix: 'alter role "postgres" set idle_in_transaction_session_timeout = 60000; alter role "postgres" set statement_timeout = 7000;',
      });
      await signIn(gateway.app, 'pooled@example.com');
    } finally {
      await gateway.close();
      await bouncer.stop();
    }
  });

  it('is quiet once Postgres applies them itself', async () => {
    // The database's settings here (the role is the machine's shared `postgres`): the same effect.
    const settled = await createTestDatabase();
    const admin = new pg.Client({ connectionString: settled.url });
    await admin.connect();
    const name = admin.escapeIdentifier(new URL(settled.url).pathname.slice(1));
    await admin.query(`alter database ${name} set statement_timeout = 7000`);
    await admin.query(`alter database ${name} set idle_in_transaction_session_timeout = 60000`);
    await admin.end();
    const bouncer = await startPgBouncer(settled.url, ignoring);
    const { lines, logStream } = capturedLog();
    try {
      const gateway = await startGateway(
        { DATABASE_URL: bouncer.urlFor(settled.url), LOG_LEVEL: 'warn', DATABASE_STATEMENT_TIMEOUT: '7' },
        { logStream },
      );
      await signIn(gateway.app, 'pooled@example.com');
      await gateway.close();
      expect(lines.filter((line) => line.msg === TIMEOUTS_UNAPPLIED)).toEqual([]);
    } finally {
      await bouncer.stop();
      await settled.drop();
    }
  });
});
