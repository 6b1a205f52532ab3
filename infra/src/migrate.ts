import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { FileMigrationProvider, type Migration, type MigrationProvider, Migrator } from 'kysely/migration';
import pg from 'pg';

const migrationFolder = fileURLToPath(new URL('../migrations', import.meta.url));

/**
 * How long a migration waits for a table's lock before it fails (the run stops; run it again): a
 * statement waiting for one holds up every later query of that table, the sign-ins' too.
 */
const LOCK_TIMEOUT = '5s';

/**
 * Each migration in a transaction of its own, all of it or none, unless it exports
 * `transaction = false`: an index built CONCURRENTLY, the one way to build it on a big table while
 * sign-ins go on writing, cannot run inside one.
 */
function oneTransactionEach(provider: MigrationProvider): MigrationProvider {
  const inTransaction =
    (step: Migration['up']): Migration['up'] =>
    (db) =>
      db.transaction().execute(async (trx) => {
        await sql`set local lock_timeout = ${sql.lit(LOCK_TIMEOUT)}`.execute(trx);
        await step(trx);
      });
  return {
    async getMigrations() {
      const migrations = await provider.getMigrations();
      return Object.fromEntries(
        Object.entries(migrations).map(([name, migration]) => [
          name,
          (migration as Migration & { transaction?: boolean }).transaction === false
            ? migration
            : {
                up: inTransaction(migration.up),
                ...(migration.down && { down: inTransaction(migration.down) }),
              },
        ]),
      );
    },
  };
}

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/tessera';

// An advisory lock of Tessera's own migration runs (a number no other lock of its uses).
const MIGRATION_RUNS = 7_165_322;

/**
 * Runs `work` while no other migration run of this database does. Runs take turns by asking for the
 * lock again every 100 ms, not by waiting in `pg_advisory_lock` as Kysely's Migrator would: a
 * statement waiting there holds a snapshot, and building an index CONCURRENTLY waits for every
 * older snapshot to end, so two runs at once would deadlock. The lock goes with the session.
 */
async function oneRunAtATime<T>(databaseUrl: string, work: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const tryLock = async () =>
      (await client.query('select pg_try_advisory_lock($1) as locked', [MIGRATION_RUNS])).rows[0].locked;
    while (!(await tryLock())) await new Promise((resolve) => setTimeout(resolve, 100));
    return await work();
  } finally {
    await client.end();
  }
}

/** Applies every pending migration to the database at `databaseUrl`; returns the names applied. */
export const migrateToLatest = (databaseUrl: string): Promise<string[]> =>
  oneRunAtATime(databaseUrl, () => migrate(databaseUrl));

async function migrate(databaseUrl: string): Promise<string[]> {
  const db = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl, max: 1 }) }),
  });
  try {
    const migrator = new Migrator({
      db,
      provider: oneTransactionEach(new FileMigrationProvider({ fs, path, migrationFolder })),
      // The transactions are the migrations' own (above).
      disableTransactions: true,
    });
    const { error, results = [] } = await migrator.migrateToLatest();
    if (error) throw error;
    return results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
  } finally {
    await db.destroy();
  }
}

/**
 * Another `create database` of the same name won: duplicate_database, or, when both passed the
 * server's own check at once, the unique violation of pg_database's index on the name.
 */
const isAlreadyCreated = (error: unknown) =>
  error instanceof pg.DatabaseError &&
  (error.code === '42P04' || (error.code === '23505' && error.constraint === 'pg_database_datname_index'));

/**
 * Creates the database named in `databaseUrl` when it does not exist yet (development convenience);
 * true when this call created it. Safe to run several at once: one creates it, the others find it.
 */
export async function createDatabaseIfMissing(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount) return false;
    await client.query(`create database ${client.escapeIdentifier(name)}`);
    return true;
  } catch (error) {
    if (isAlreadyCreated(error)) return false;
    throw error;
  } finally {
    await client.end();
  }
}

// `pnpm db:migrate`: creates the database in development, then migrates it.
if (import.meta.main) {
  const databaseUrl = process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
  const appEnv = process.env.APP_ENV ?? 'development';
  try {
    if (appEnv === 'development' && (await createDatabaseIfMissing(databaseUrl))) {
      console.log('Created database %s', new URL(databaseUrl).pathname.slice(1));
    }
    const applied = await migrateToLatest(databaseUrl);
    console.log(applied.length ? `Applied migrations: ${applied.join(', ')}` : 'Database is up to date');
  } catch (error) {
    console.error(`Migration failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  }
}
