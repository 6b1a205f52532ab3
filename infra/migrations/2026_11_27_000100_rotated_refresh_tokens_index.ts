import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
// The retention sweep deletes the rotated refresh tokens that expired, a batch at a time, in the
// order of their expiry. Without an index of just those, each batch read the whole table: 0.6–1.1 s
// a batch beside 4.4 million tokens, batch after batch. Built CONCURRENTLY, outside a transaction,
// so that sign-ins and refreshes go on writing tokens meanwhile.
export const transaction = false;

const INDEX = 'refresh_tokens_rotated_expires_at_idx';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A build that failed half-way (cancelled, a deadlock) leaves an invalid index of this name.
  await sql`drop index concurrently if exists ${sql.ref(INDEX)}`.execute(db);
  await sql`create index concurrently ${sql.ref(INDEX)} on refresh_tokens (expires_at)
    where rotated_at is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index concurrently if exists ${sql.ref(INDEX)}`.execute(db);
}
