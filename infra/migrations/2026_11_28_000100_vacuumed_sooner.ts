import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
// Every refresh leaves a row version behind in sessions and refresh_tokens, and by default autovacuum
// waits for a fifth of a table to be dead (200,000 rows of a million) before it cleans it: the sweep's
// index scans and every look-up read past them meanwhile. A fiftieth here. A returning user's sign-in
// sets last_login, which no index covers: with a tenth of each new page of users left free, Postgres
// updates the row in place (HOT) instead of adding an entry to each of its indexes.
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const table of ['sessions', 'refresh_tokens'])
    await sql`alter table ${sql.table(table)} set (autovacuum_vacuum_scale_factor = 0.02)`.execute(db);
  await sql`alter table users set (fillfactor = 90)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table users reset (fillfactor)`.execute(db);
  for (const table of ['sessions', 'refresh_tokens'])
    await sql`alter table ${sql.table(table)} reset (autovacuum_vacuum_scale_factor)`.execute(db);
}
