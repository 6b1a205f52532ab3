import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { appEnvMissingInProduction, databaseUrlProblem } from '@tessera/config';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { FileMigrationProvider, type Migration, Migrator } from 'kysely/migration';
import pg from 'pg';
import { parseIntoClientConfig, parse as parsePostgresUrl } from 'pg-connection-string';

const migrationFolder = fileURLToPath(new URL('../migrations', import.meta.url));

/**
 * How long a migration waits for a table's lock before it fails (the run stops; run it again): a
 * statement waiting for one holds up every later query of that table, the sign-ins' too.
 */
const LOCK_TIMEOUT = '5s';

/** A migration that exports `transaction = false`: an index built CONCURRENTLY, which cannot run in one. */
const outsideTransaction = (migration: Migration) =>
  (migration as Migration & { transaction?: boolean }).transaction === false;

/** The migrations, those that run in a transaction given LOCK_TIMEOUT as their first statement. */
function withLockTimeout(migrations: Record<string, Migration>): Record<string, Migration> {
  const first =
    (step: Migration['up']): Migration['up'] =>
    async (db) => {
      await sql`set local lock_timeout = ${sql.lit(LOCK_TIMEOUT)}`.execute(db);
      await step(db);
    };
  return Object.fromEntries(
    Object.entries(migrations).map(([name, migration]) => [
      name,
      outsideTransaction(migration)
        ? migration
        : { up: first(migration.up), ...(migration.down && { down: first(migration.down) }) },
    ]),
  );
}

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/tessera';

// An advisory lock of Tessera's migration runs (a number no other lock of its uses).
const MIGRATION_RUNS = 7_165_322;

/**
 * Applies every pending migration to the database at `databaseUrl`, one at a time, each with its
 * record in `kysely_migration` in one transaction (all of it or none), or, for one built outside a
 * transaction, with its record after it; returns the names applied.
 *
 * One connection does it all. Runs at once take turns by asking for a lock of that session every
 * 100 ms, not by waiting in `pg_advisory_lock` (Kysely's Migrator then takes its own lock on the same
 * session at once): a statement waiting there holds a snapshot, and an index built CONCURRENTLY
 * waits for every older snapshot to end, so two runs would deadlock.
 */
export async function migrateToLatest(databaseUrl: string): Promise<string[]> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1, idleTimeoutMillis: 0 });
  // A connection lost between two statements fails the run at the next one, not the process.
  pool.on('error', () => {});
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  try {
    // A role's own timeouts, set for the gateway's requests (README, Operations: PgBouncer), are not
    // a migration's: building an index may take minutes. Its waits for locks have LOCK_TIMEOUT.
    await sql`set statement_timeout = 0`.execute(db);
    await sql`set idle_in_transaction_session_timeout = 0`.execute(db);
    const tryLock = async () =>
      (await sql<{ locked: boolean }>`select pg_try_advisory_lock(${MIGRATION_RUNS}) as locked`.execute(db))
        .rows[0]?.locked;
    while (!(await tryLock())) await new Promise((resolve) => setTimeout(resolve, 100));

    const modules = await new FileMigrationProvider({ fs, path, migrationFolder }).getMigrations();
    const migrations = withLockTimeout(modules);
    const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
    const pending = (await migrator.getMigrations()).filter(
      (migration) => migration.executedAt === undefined,
    );
    const applied: string[] = [];
    for (const { name } of pending) {
      const module = modules[name];
      const { error, results = [] } = await migrator.migrateUp({
        disableTransactions: module !== undefined && outsideTransaction(module),
      });
      if (error) throw error;
      applied.push(...results.filter((r) => r.status === 'Success').map((r) => r.migrationName));
    }
    return applied;
  } finally {
    // Ends the session, and the lock with it.
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
 * Why a command could not use Postgres, and what to do: the error's message, then, when Postgres was
 * not reached or refused the login, where it was looked for (the URL without its password).
 */
export function postgresFailure(error: unknown, databaseUrl: string): string {
  const message = error instanceof Error ? error.message || String(error) : String(error);
  const code = (error as { code?: unknown })?.code;
  // ENOENT: no socket in the folder named (a Unix socket's URL).
  const unreachable = ['ECONNREFUSED', 'ENOENT', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH', '28P01', '28000'];
  if (!unreachable.includes(String(code))) return message;
  // As node-postgres reads it: the host may be a socket's folder, given in the query.
  const { host, port } = parsePostgresUrl(databaseUrl);
  const where = `${host || 'localhost'}${port ? `:${port}` : ''}`;
  return `${message} (is Postgres running at ${where}, and may this user sign in? DATABASE_URL is ${withoutPasswords(databaseUrl)})`;
}

/** The URL with its passwords as `***`; node-postgres's form with no host after the credentials too. */
function withoutPasswords(databaseUrl: string): string {
  const noHost = !URL.canParse(databaseUrl);
  const url = new URL(noHost ? databaseUrl.replace('@/', '@host/') : databaseUrl);
  url.password = url.password && '***';
  for (const name of ['password', 'sslpassword'])
    if (url.searchParams.has(name)) url.searchParams.set(name, '***');
  return noHost ? url.toString().replace('@host/', '@/') : url.toString();
}

/**
 * Creates the database named in `databaseUrl` when it does not exist yet (development convenience);
 * true when this call created it. Safe to run several at once: one creates it, the others find it.
 */
export async function createDatabaseIfMissing(databaseUrl: string): Promise<boolean> {
  // As node-postgres reads it (every form it takes), connecting to the `postgres` database instead.
  const { database: name, ...connection } = parseIntoClientConfig(databaseUrl);
  if (!name) return false;
  const client = new pg.Client({ ...connection, database: 'postgres' });
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
  if (appEnvMissingInProduction(process.env)) {
    console.error('Migration failed: APP_ENV is not set and NODE_ENV=production: set APP_ENV=production');
    process.exit(1);
  }
  // Not quoted back: node-postgres would read another form as a socket folder, password included.
  const problem = databaseUrlProblem(databaseUrl);
  if (problem) {
    console.error(`Migration failed: ${problem}`);
    process.exit(1);
  }
  try {
    if (appEnv === 'development' && (await createDatabaseIfMissing(databaseUrl))) {
      console.log('Created database %s', parsePostgresUrl(databaseUrl).database);
    }
    const applied = await migrateToLatest(databaseUrl);
    console.log(applied.length ? `Applied migrations: ${applied.join(', ')}` : 'Database is up to date');
  } catch (error) {
    console.error(`Migration failed: ${postgresFailure(error, databaseUrl)}`);
    process.exitCode = 1;
  }
}
