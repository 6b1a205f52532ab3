import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kysely, PostgresDialect } from 'kysely';
import { FileMigrationProvider, Migrator } from 'kysely/migration';
import pg from 'pg';

const migrationFolder = fileURLToPath(new URL('../migrations', import.meta.url));

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/tessera';

/** Applies every pending migration to the database at `databaseUrl`; returns the names applied. */
export async function migrateToLatest(databaseUrl: string): Promise<string[]> {
  const db = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl, max: 1 }) }),
  });
  try {
    const migrator = new Migrator({ db, provider: new FileMigrationProvider({ fs, path, migrationFolder }) });
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
