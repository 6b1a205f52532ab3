import {
  CamelCasePlugin,
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  NoResultError,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
} from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from './database.ts';
import { prepareQuery } from './prepared.ts';

/** A Kysely for Postgres, with the app's plugin, whose driver records queries and answers `result`. */
function recordingDb(result: QueryResult<unknown> = { rows: [] }) {
  const queries: CompiledQuery[] = [];
  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery) {
      queries.push(query);
      return result as QueryResult<R>;
    },
    streamQuery: () => {
      throw new Error('not streamed');
    },
  };
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: async () => {},
    commitTransaction: async () => {},
    rollbackTransaction: async () => {},
    releaseConnection: async () => {},
    destroy: async () => {},
  };
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
    plugins: [new CamelCasePlugin()],
  });
  return { db, queries };
}

interface Args {
  sessionId: string;
  tokenHash: Buffer;
  now: Date;
  userAgent: string | null;
}

const build = (db: Kysely<Database>, $: Args) =>
  db
    .selectFrom('sessions')
    .select((eb) => [
      'userId',
      eb.val($.now).as('seenAt'),
      eb.val('constant').as('label'),
      eb.val($.userAgent).as('agent'),
    ])
    .where('id', '=', $.sessionId)
    .where('createdAt', '<', $.now)
    .where('endedAt', 'is', null)
    .where((eb) => eb.exists(eb.selectFrom('refreshTokens').where('tokenHash', '=', $.tokenHash)));

const args = (): Args => ({
  sessionId: '6f1c0c8e-3d0a-4c1e-9b1a-0f7c2b6c9d11',
  tokenHash: Buffer.from('hash'),
  now: new Date('2026-11-23T12:00:00Z'),
  userAgent: null,
});

describe('prepareQuery', () => {
  it('runs the SQL the builder compiles, each argument at its positions and the constants kept', async () => {
    const { db, queries } = recordingDb();
    const values = args();
    await prepareQuery(build).rows(db, values);

    const expected = build(db, values).compile();
    const [query] = queries;
    expect(query?.sql).toBe(expected.sql);
    expect(query?.parameters).toEqual(expected.parameters);
    expect(query?.parameters).toEqual([
      values.now,
      'constant',
      null,
      values.sessionId,
      values.now,
      values.tokenHash,
    ]);
    // Dates and Buffers pass through as they are, for pg to serialize.
    expect(query?.parameters[0]).toBe(values.now);
    expect(query?.parameters[5]).toBe(values.tokenHash);
  });

  it('builds and compiles once per Kysely instance', async () => {
    let builds = 0;
    const prepared = prepareQuery((db: Kysely<Database>, $: Args) => {
      builds++;
      return build(db, $);
    });
    const first = recordingDb();
    const second = recordingDb();
    await prepared.rows(first.db, args());
    await prepared.rows(first.db, { ...args(), sessionId: 'other', userAgent: 'curl' });
    expect(builds).toBe(1);
    expect(first.queries[1]?.parameters).toEqual([
      args().now,
      'constant',
      'curl',
      'other',
      args().now,
      args().tokenHash,
    ]);
    await prepared.rows(second.db, args());
    expect(builds).toBe(2);
  });

  it("answers the rows through the instance's plugins, as the builder would", async () => {
    const { db } = recordingDb({ rows: [{ user_id: 'u1', seen_at: 'x' }] });
    const prepared = prepareQuery(build);
    expect(await prepared.first(db, args())).toEqual({ userId: 'u1', seenAt: 'x' });
    expect(await prepared.firstOrThrow(db, args())).toEqual({ userId: 'u1', seenAt: 'x' });
    expect(await prepared.rows(db, args())).toEqual([{ userId: 'u1', seenAt: 'x' }]);
  });

  it('answers the affected rows, and NoResultError from firstOrThrow when there is no row', async () => {
    const { db } = recordingDb({ rows: [], numAffectedRows: 2n });
    const end = prepareQuery((db: Kysely<Database>, $: { userId: string; at: Date }) =>
      db.updateTable('sessions').set({ endedAt: $.at }).where('userId', '=', $.userId),
    );
    expect((await end.execute(db, { userId: 'u1', at: new Date() })).numAffectedRows).toBe(2n);
    await expect(prepareQuery(build).firstOrThrow(db, args())).rejects.toBeInstanceOf(NoResultError);
  });

  it('refuses a call without a value for an argument', async () => {
    const { db, queries } = recordingDb();
    const { tokenHash: _, ...partial } = args();
    await expect(prepareQuery(build).rows(db, partial as Args)).rejects.toThrow(
      'prepared query: no value for argument "tokenHash"',
    );
    expect(queries).toEqual([]);
  });

  it('refuses to prepare a query in which an argument is not a parameter of its own', async () => {
    const { db } = recordingDb();
    const unused = prepareQuery((db: Kysely<Database>, $: { userId: string; limit: number }) => {
      void $.limit;
      return db.selectFrom('sessions').selectAll().where('userId', '=', $.userId);
    });
    await expect(unused.rows(db, { userId: 'u1', limit: 1 })).rejects.toThrow(
      /argument "limit" is no parameter of the compiled SQL/,
    );
    const expanded = prepareQuery((db: Kysely<Database>, $: { tags: string }) =>
      db.selectFrom('sessions').select((eb) => eb.val([$.tags]).as('tags')),
    );
    await expect(expanded.rows(db, { tags: 'a' })).rejects.toThrow(/a marker inside a parameter's value/);
  });
});
