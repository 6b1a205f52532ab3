import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
// A security event keeps the id of its session as recorded, after the retention sweep deleted the
// session (30 days) and for as long as the event is kept (a year): it is history. The foreign key
// set it to null instead, and Postgres did that by reading the whole events table for every session
// deleted, with no index on session_id (2.8 s for 100 sessions beside 500,000 events); it also
// checked the session on every event written.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('security_events').dropConstraint('security_events_session_id_fkey').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`update security_events e set session_id = null
    where session_id is not null and not exists (select 1 from sessions s where s.id = e.session_id)`.execute(
    db,
  );
  await db.schema
    .alterTable('security_events')
    .addForeignKeyConstraint('security_events_session_id_fkey', ['session_id'], 'sessions', ['id'], (c) =>
      c.onDelete('set null'),
    )
    .execute();
}
