import type { Kysely } from 'kysely';

// Frozen in time: a migration never imports application code.
// The retention sweep finds expired rows by these columns, a batch at a time.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('sessions_expires_at_idx').on('sessions').column('expires_at').execute();
  await db.schema.createIndex('sessions_ended_at_idx').on('sessions').column('ended_at').execute();
  await db.schema
    .createIndex('refresh_tokens_expires_at_idx')
    .on('refresh_tokens')
    .column('expires_at')
    .execute();
  await db.schema
    .createIndex('security_events_created_at_idx')
    .on('security_events')
    .column('created_at')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const index of [
    'security_events_created_at_idx',
    'refresh_tokens_expires_at_idx',
    'sessions_ended_at_idx',
    'sessions_expires_at_idx',
  ])
    await db.schema.dropIndex(index).execute();
}
