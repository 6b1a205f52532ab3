import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
export async function up(db: Kysely<unknown>): Promise<void> {
  // What happened to whose account, from where: sign-ins, refresh-token reuse, revocations,
  // logouts, lock-outs and rate limiting. Never a code, a token or an email address.
  await db.schema
    .createTable('security_events')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('user_id', 'uuid', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('session_id', 'uuid', (c) => c.references('sessions.id').onDelete('set null'))
    .addColumn('ip_address', 'text')
    .addColumn('user_agent', 'text')
    .addColumn('details', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  // A user's own history, newest first.
  await db.schema
    .createIndex('security_events_user_idx')
    .on('security_events')
    .columns(['user_id', 'created_at desc', 'id desc'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('security_events').execute();
}
