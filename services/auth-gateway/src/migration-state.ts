import { DependencyUnavailableError } from '@tessera/contracts';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { MIGRATIONS } from './database.generated.ts';
import type { Database } from './database.ts';

/** Why the gateway is not ready on a database that lacks one of its migrations. */
export const SCHEMA_BEHIND = 'postgres schema is behind: run pnpm db:migrate';

// Postgres's undefined_table: no kysely_migration, a database no migration ever ran on.
const UNDEFINED_TABLE = '42P01';
// insufficient_privilege: a gateway role granted the app's tables only, not kysely_migration.
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * The migrations this code was written for (MIGRATIONS, from `pnpm db:types`) that the database has
 * not applied, oldest first: all of them on a database never migrated. Kysely's Migrator records each
 * migration it applies in kysely_migration; migrations this code does not know (a newer gateway's,
 * during a rolling deploy) do not count. Undefined when the gateway's role may not read that table:
 * nothing can be told. One query.
 */
async function missingMigrations(db: Kysely<Database>): Promise<string[] | undefined> {
  try {
    const { rows } = await sql<{ name: string }>`
      select name from kysely_migration where name = any(${MIGRATIONS})`.execute(db);
    const applied = new Set(rows.map((row) => row.name));
    return MIGRATIONS.filter((name) => !applied.has(name));
  } catch (error) {
    // A missing table reaches here as "not now" (plugins/db.ts) while the schema is not known current.
    const cause = error instanceof DependencyUnavailableError ? error.cause : error;
    if (!(cause instanceof pg.DatabaseError)) throw error;
    if (cause.code === UNDEFINED_TABLE) return [...MIGRATIONS];
    if (cause.code === INSUFFICIENT_PRIVILEGE) return undefined;
    throw error;
  }
}

export type SchemaState = ReturnType<typeof schemaState>;

/**
 * Whether the database has every migration of this code: asked of Postgres until it first has, then
 * remembered. A migrated schema does not go back (Tessera's operations never migrate down), so once
 * current, checking costs nothing.
 */
export function schemaState(db: Kysely<Database>) {
  let current = false;
  return {
    /** Known current already, without a query. */
    knownCurrent: () => current,
    /** One query until the schema is first seen current; none after. Rejects while Postgres does not answer. */
    async isCurrent(): Promise<boolean> {
      // A schema that cannot be read is taken as current: readiness then checks what it did before.
      // Only ever set, never cleared: a slower check that began before the last migration landed
      // must not undo what a later one saw.
      if (!current && ((await missingMigrations(db)) ?? []).length === 0) current = true;
      return current;
    },
  };
}

/** At start: one warning line when the database lacks migrations this code needs (the gateway is not ready until then). */
export async function warnIfSchemaBehind(
  db: Kysely<Database>,
  log: { warn(fields: object, message: string): void },
): Promise<void> {
  const missing = await missingMigrations(db);
  if (missing === undefined) {
    log.warn(
      {},
      "Cannot tell whether the database has this gateway's migrations (permission denied for kysely_migration): readiness does not check them; grant SELECT on kysely_migration to the gateway's role",
    );
    return;
  }
  if (missing.length === 0) return;
  const count =
    missing.length === 1 ? 'its missing migration is' : `its ${missing.length} missing migrations are`;
  log.warn(
    { missingMigrations: missing },
    `${SCHEMA_BEHIND}; this gateway is not ready until ${count} applied`,
  );
}
