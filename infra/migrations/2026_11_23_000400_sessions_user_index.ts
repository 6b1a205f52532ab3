import type { Kysely } from 'kysely';

// Frozen in time: a migration never imports application code.
// Every session of one user, ended or not (logout, account deletion): without it those statements
// read the whole sessions table.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('sessions_user_idx').on('sessions').column('user_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('sessions_user_idx').execute();
}
