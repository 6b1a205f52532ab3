import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
// A refresh updates its session (last_used_at, expires_at) and its token (rotated_at): with no index
// on the columns it sets and room left in each page, Postgres updates those rows in place (HOT)
// instead of adding an entry to every index of the table. The retention sweep finds an expired
// session through its current refresh token instead, which expires with it. Open sessions (ended_at
// null) are left out of the ended_at index, which only the sweep reads: a sign-in writes one index
// entry fewer.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('sessions_expires_at_idx').execute();
  await db.schema.dropIndex('sessions_ended_at_idx').execute();
  await db.schema
    .createIndex('sessions_ended_at_idx')
    .on('sessions')
    .column('ended_at')
    .where(sql.ref('ended_at'), 'is not', null)
    .execute();
  await sql`alter table sessions set (fillfactor = 80)`.execute(db);
  await sql`alter table refresh_tokens set (fillfactor = 80)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table refresh_tokens reset (fillfactor)`.execute(db);
  await sql`alter table sessions reset (fillfactor)`.execute(db);
  await db.schema.dropIndex('sessions_ended_at_idx').execute();
  await db.schema.createIndex('sessions_ended_at_idx').on('sessions').column('ended_at').execute();
  await db.schema.createIndex('sessions_expires_at_idx').on('sessions').column('expires_at').execute();
}
