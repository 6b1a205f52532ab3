import { DependencyUnavailableError } from '@tessera/contracts';
import fp from 'fastify-plugin';
import { CamelCasePlugin, Kysely, PostgresDialect, type PostgresPool, sql } from 'kysely';
import pg from 'pg';
import type { Database } from '../database.ts';

declare module 'fastify' {
  interface FastifyInstance {
    db: Kysely<Database>;
  }
}

// SQLSTATE classes and codes that say "not now": connection exceptions, the server shutting down,
// too many connections. Everything else the server answers is about the query.
const UNAVAILABLE_STATES = /^(08|57P0[123]$|53300$)/;

/** What the pool rejects with: an outage as DependencyUnavailableError, a query's own error as it is. */
function classify(error: unknown): unknown {
  if (error instanceof pg.DatabaseError && !UNAVAILABLE_STATES.test(error.code ?? '')) return error;
  return new DependencyUnavailableError('postgres', { cause: error });
}

/** A pg pool whose failures to connect, and lost connections, reject with DependencyUnavailableError. */
function classifyingPool(pool: pg.Pool): PostgresPool {
  return {
    async connect() {
      const client = await pool.connect().catch((error: unknown) => {
        throw new DependencyUnavailableError('postgres', { cause: error });
      });
      return {
        query: ((text: string, values: unknown[]) =>
          client.query(text, values).catch((error: unknown) => {
            throw classify(error);
          })) as never,
        release: (destroy?: boolean) => client.release(destroy),
      };
    },
    end: () => pool.end(),
    options: pool.options,
  };
}

/** Postgres through Kysely; checked at start so a wrong DATABASE_URL fails loudly, closed on shutdown. */
export default fp<{ url: string }>(
  async function dbPlugin(app, { url }) {
    const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 3000 });
    pool.on('error', (err) => app.log.warn({ err }, 'idle Postgres client lost'));
    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: classifyingPool(pool) }),
      plugins: [new CamelCasePlugin()],
    });
    app.decorate('db', db);
    // The pool, not Kysely: a request still running meets a closed pool, an outage like any other.
    app.addHook('onClose', async () => {
      if (!pool.ended) await pool.end();
    });
    await sql`select 1`.execute(db);
  },
  { name: 'db' },
);
