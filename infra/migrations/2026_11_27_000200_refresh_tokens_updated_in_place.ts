import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
// A refresh sets its old token's rotated_at. An index whose predicate names that column (the partial
// index of rotated tokens) keeps Postgres from updating the row in place (HOT): every refresh then
// wrote a new version of the row and an entry in each of the table's indexes. The retention sweep
// finds expired rotated tokens through refresh_tokens_expires_at_idx instead, in the same order.
export const transaction = false;

const INDEX = 'refresh_tokens_rotated_expires_at_idx';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`drop index concurrently if exists ${sql.ref(INDEX)}`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index concurrently if exists ${sql.ref(INDEX)}`.execute(db);
  await sql`create index concurrently ${sql.ref(INDEX)} on refresh_tokens (expires_at)
    where rotated_at is not null`.execute(db);
}
