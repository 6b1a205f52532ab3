import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
const RENAMED_EVENT_TYPES = [
  ['revoke', 'session_revoked'],
  ['lockout', 'code_locked'],
  ['rate_limit', 'rate_limited'],
] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  // Security event types become the closed list the API documents.
  for (const [from, to] of RENAMED_EVENT_TYPES)
    await sql`update security_events set type = ${to} where type = ${from}`.execute(db);
  // Usernames are unique whatever their case: two concurrent claims of Alice and alice cannot both win.
  await sql`alter table users drop constraint users_username_key`.execute(db);
  await sql`create unique index users_username_lower_key on users (lower(username))`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index users_username_lower_key`.execute(db);
  await sql`alter table users add constraint users_username_key unique (username)`.execute(db);
  for (const [from, to] of RENAMED_EVENT_TYPES)
    await sql`update security_events set type = ${from} where type = ${to}`.execute(db);
}
