import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
export async function up(db: Kysely<unknown>): Promise<void> {
  // The account deletion sweep: the scheduled deletions that are due, oldest first. Partial, so the
  // index holds only the few accounts waiting for deletion, not every user.
  await db.schema
    .createIndex('users_account_deletion_due_idx')
    .on('users')
    .column('account_deletion_scheduled_for')
    .where(sql.ref('account_deletion_status'), '=', 'scheduled')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('users_account_deletion_due_idx').execute();
}
