import { randomBytes } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '@tessera/testing';
import { CamelCasePlugin, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/clock.ts';
import type { Database } from '../src/database.ts';
import * as retention from '../src/modules/housekeeping/retention.repository.ts';
import { retentionBatches } from '../src/modules/housekeeping/retention.ts';
import * as sessions from '../src/modules/sessions/sessions.repository.ts';
import { upsertOnSignIn, upsertOnSignInQuery } from '../src/modules/users/users.repository.ts';

let database: TestDatabase;
let db: Kysely<Database>;
let pool: pg.Pool;
const statements: { sql: string; parameters: readonly unknown[] }[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 1 });
  db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    plugins: [new CamelCasePlugin()],
    log: (event) => {
      if (event.level === 'query') statements.push(event.query);
    },
  });
  // 4,000 other users with 5 sessions each: a table where reading every row is what a statement
  // without a fitting index costs.
  await sql`insert into users (email, created_at, updated_at, last_login)
    select 'other-' || g || '@example.com', now(), now(), now() from generate_series(1, 4000) g`.execute(db);
  await sql`insert into sessions (user_id, created_at, last_used_at, expires_at)
    select id, now(), now(), now() + interval '30 days' from users, generate_series(1, 5)`.execute(db);
  await sql`insert into refresh_tokens (token_hash, session_id, issued_at, expires_at)
    select sha256(id::text::bytea), id, now(), expires_at from sessions`.execute(db);
  await sql`analyze`.execute(db);
});
afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

/** The plan Postgres picks for a statement the repository just ran (`back` 1: the last), as JSON text. */
async function planOfLast(back = 1): Promise<string> {
  const last = statements.at(-back);
  if (!last) throw new Error('no statement ran');
  const { rows } = await pool.query(`explain (format json) ${last.sql}`, [...last.parameters]);
  return JSON.stringify(rows[0]);
}

/** A run of the retention sweep (a day's retention of sessions, a year's of events) to its end; its batches. */
async function sweepToTheEnd(): Promise<number> {
  const sweep = retentionBatches({
    db,
    clock: systemClock,
    sessionRetention: 86_400,
    securityEventRetention: 365 * 86_400,
    log: pino({ level: 'silent' }),
  });
  statements.length = 0;
  let batches = 1;
  while ((await sweep(100)) === 100) batches += 1;
  return batches;
}

/** The tables of the deletes run since `statements` was last emptied, in order. */
const deletedTables = () =>
  statements.flatMap((statement) => /^delete from "?(\w+)"? /.exec(statement.sql.trimStart())?.[1] ?? []);

describe("one user's sessions", () => {
  it('are found through an index on logout, not by reading every session', async () => {
    const { rows } = await pool.query<{ id: string }>(
      "select id from users where email = 'other-1@example.com'",
    );
    const userId = rows[0]?.id as string;
    const now = new Date();

    const ending = {
      userId,
      ipAddress: '192.0.2.1',
      userAgent: null,
      sessionId: null,
      now,
      startedBefore: null,
    };
    expect(await sessions.logoutEverywhere(db, ending, true)).toMatchObject({ ended: 5 });
    expect(await planOfLast()).not.toContain('Seq Scan');
  });
});

/** For each of `tables`: the rows `run` updated, and how many of them in place (HOT), in one transaction. */
async function updatesOf(tables: string[], run: (trx: Kysely<Database>) => Promise<unknown>) {
  return db.transaction().execute(async (trx) => {
    // This connection's counts not yet reported include its statements before: the difference counts.
    const counts = async () => {
      const { rows: stats } = await sql<{ relname: string; updated: string; hot: string }>`
        select relname, n_tup_upd as updated, n_tup_hot_upd as hot from pg_stat_xact_user_tables
        where relname in (${sql.join(tables)}) order by relname`.execute(trx);
      return stats.map(({ updated, hot }) => [Number(updated), Number(hot)]);
    };
    const before = await counts();
    await run(trx);
    const after = await counts();
    return [...tables]
      .sort()
      .map((table, i) => [table, ...(after[i] ?? []).map((count, j) => count - (before[i]?.[j] ?? 0))]);
  });
}

describe('a refresh', () => {
  it('updates its token and its session in place (HOT): no index entry for either', async () => {
    const { rows } = await pool.query<{ tokenHash: Buffer }>(
      `select token_hash as "tokenHash" from refresh_tokens t join sessions s on s.id = t.session_id
        where t.rotated_at is null and s.ended_at is null limit 1`,
    );
    const now = new Date();
    const updates = await updatesOf(['refresh_tokens', 'sessions'], async (trx) => {
      const rotated = await sessions.rotateRefreshToken(trx, {
        tokenHash: rows[0]?.tokenHash as Buffer,
        successorHash: randomBytes(32),
        successorSealed: randomBytes(48),
        now,
        expiresAt: new Date(now.getTime() + 86_400_000),
      });
      expect(rotated).toBeDefined();
    });
    expect(updates).toEqual([
      ['refresh_tokens', 1, 1],
      ['sessions', 1, 1],
    ]);
  });
});

describe("a returning user's sign-in", () => {
  it('sets last_login in place (HOT), even on a page filled by inserts: no entry in any index of users', async () => {
    const updates = await updatesOf(['users'], (trx) =>
      upsertOnSignInQuery(trx, upsertOnSignIn('other-7@example.com', new Date())).execute(),
    );
    expect(updates).toEqual([['users', 1, 1]]);
  });
});

describe('the retention sweep', () => {
  it('finds ended and expired sessions through indexes, not by reading every session', async () => {
    const longAgo = new Date(Date.now() - 86_400_000);
    expect(await retention.deleteOldSessions(db, longAgo, 100)).toBe(0);
    expect(await planOfLast(2)).not.toContain('Seq Scan');
    expect(await planOfLast(1)).not.toContain('Seq Scan');
  });

  it('reads each batch of a big backlog in index order: half the tokens and events due', async () => {
    // Half of every token rotated and expired, half of the events old: where a plain scan would find
    // a batch at once, until the batches before it left the front of the table dead.
    await sql`update refresh_tokens set rotated_at = now() - interval '90 days',
      expires_at = now() - interval '60 days' where session_id in (select id from sessions where random() < 0.5)`.execute(
      db,
    );
    await sql`insert into security_events (type, user_id, created_at)
      select 'sign_in', user_id, now() - (g % 2) * interval '400 days' from sessions, generate_series(1, 2) g`.execute(
      db,
    );
    await sql`analyze`.execute(db);
    const before = new Date(Date.now() - 86_400_000);

    expect(await retention.deleteOldRefreshTokens(db, before, 100)).toBe(100);
    const yearAgo = new Date(Date.now() - 365 * 86_400_000);
    expect(await retention.deleteOldSecurityEvents(db, yearAgo, 100)).toBe(100);
    for (const back of [2, 1]) {
      const plan = await planOfLast(back);
      expect(plan).not.toContain('Seq Scan');
      expect(plan).not.toContain('"Sort"');
    }
  });

  it('asks no more for a kind of row that came back short, while another kind has a backlog', async () => {
    // The tokens and events left due by the test before; no session is.
    const batches = await sweepToTheEnd();
    const deletesOf = (table: string) => deletedTables().filter((deleted) => deleted === table).length;
    expect(batches).toBeGreaterThan(10);
    // Ended, and expired: once each.
    expect(deletesOf('sessions')).toBe(2);
    expect(deletesOf('security_events')).toBe(batches);
  });

  it('deletes rotated tokens once the backlog of expired sessions is gone, not reading past their tokens', async () => {
    // 250 sessions expired two months ago, never refreshed: their current tokens sit in the index of
    // expiry among the 50 rotated tokens that expired then.
    await sql`with expired as (select s.id from sessions s join refresh_tokens t on t.session_id = s.id
          where s.ended_at is null and t.rotated_at is null limit 250),
        s as (update sessions set expires_at = now() - interval '60 days' where id in (select id from expired))
      update refresh_tokens set expires_at = now() - interval '60 days'
      where session_id in (select id from expired)`.execute(db);
    await sql`insert into refresh_tokens (token_hash, session_id, issued_at, expires_at, rotated_at)
      select sha256((id::text || '-rotated')::bytea), id, now() - interval '90 days',
        now() - interval '60 days', now() - interval '89 days'
      from sessions where expires_at > now() limit 50`.execute(db);
    await sql`analyze`.execute(db);

    await sweepToTheEnd();
    const deletes = deletedTables().filter((table) => table === 'sessions' || table === 'refresh_tokens');
    // Three batches of sessions (100, 100, 50), each two statements (ended, expired); then the tokens.
    expect(deletes).toEqual([...Array(6).fill('sessions'), 'refresh_tokens']);
    const { rows } = await sql<{ left: string }>`select count(*) as left from refresh_tokens
      where expires_at < now() - interval '1 day'`.execute(db);
    expect(Number(rows[0]?.left)).toBe(0);
  });

  it('deletes old sessions without reading every security event, which keep their session id', async () => {
    // 20,000 events, two per session; 100 sessions ended two months ago.
    await sql`insert into security_events (type, user_id, session_id, created_at)
      select t, user_id, id, now() from sessions, (values ('sign_in'), ('logout')) v(t)`.execute(db);
    await sql`update sessions set ended_at = now() - interval '60 days', end_reason = 'logout'
      where id in (select id from sessions limit 100)`.execute(db);
    await sql`analyze`.execute(db);

    const scans = await db.transaction().execute(async (trx) => {
      expect(await retention.deleteOldSessions(trx, new Date(Date.now() - 86_400_000), 100)).toBe(100);
      const { rows } = await sql<{ seqScan: string }>`select seq_scan from pg_stat_xact_user_tables
        where relname = 'security_events'`.execute(trx);
      return Number(rows[0]?.seqScan);
    });
    expect(scans).toBe(0);
    const { rows } = await sql<{ dangling: string }>`select count(*) as dangling from security_events e
      where session_id is not null and not exists (select 1 from sessions s where s.id = e.session_id)`.execute(
      db,
    );
    expect(Number(rows[0]?.dangling)).toBe(200);
  });
});
