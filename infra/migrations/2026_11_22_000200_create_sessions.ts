import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sessions')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('user_id', 'uuid', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('ip_address', 'text')
    .addColumn('user_agent', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_used_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('ended_at', 'timestamptz')
    .addColumn('end_reason', 'text')
    .execute();
  // The sessions list: a user's active sessions, newest first, id as the tie-breaker.
  await db.schema
    .createIndex('sessions_user_active_idx')
    .on('sessions')
    .columns(['user_id', 'created_at desc', 'id desc'])
    .where(sql.ref('ended_at'), 'is', null)
    .execute();

  // One row per refresh token ever issued; only the SHA-256 of the token is kept.
  await db.schema
    .createTable('refresh_tokens')
    .addColumn('token_hash', 'bytea', (c) => c.primaryKey())
    .addColumn('session_id', 'uuid', (c) => c.notNull().references('sessions.id').onDelete('cascade'))
    .addColumn('issued_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('rotated_at', 'timestamptz')
    // The successor token sealed with a key derived from this token: only its holder can open it,
    // which lets a refresh inside the reuse grace window return the same successor again.
    .addColumn('successor_sealed', 'bytea')
    .execute();
  await db.schema
    .createIndex('refresh_tokens_session_idx')
    .on('refresh_tokens')
    .column('session_id')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('refresh_tokens').execute();
  await db.schema.dropTable('sessions').execute();
}
