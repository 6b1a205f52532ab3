import { type Kysely, sql } from 'kysely';
import type { Database } from '../../database.ts';

/**
 * Deletes up to `limit` sessions that ended or expired before `before`, with their refresh tokens
 * (foreign key cascade); their security events keep their row, with no session. Rows another process
 * is deleting are skipped, so several gateways share the work.
 */
export async function deleteOldSessions(db: Kysely<Database>, before: Date, limit: number): Promise<number> {
  const result = await sql`
    delete from sessions where id in (
      select id from sessions
      where expires_at < ${before} or ended_at < ${before}
      limit ${limit} for update skip locked)`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/** Deletes up to `limit` refresh tokens that expired before `before`, of sessions still kept. */
export async function deleteOldRefreshTokens(
  db: Kysely<Database>,
  before: Date,
  limit: number,
): Promise<number> {
  const result = await sql`
    delete from refresh_tokens where token_hash in (
      select token_hash from refresh_tokens
      where expires_at < ${before}
      limit ${limit} for update skip locked)`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/** Deletes up to `limit` security events recorded before `before`. */
export async function deleteOldSecurityEvents(
  db: Kysely<Database>,
  before: Date,
  limit: number,
): Promise<number> {
  const result = await sql`
    delete from security_events where id in (
      select id from security_events
      where created_at < ${before}
      limit ${limit} for update skip locked)`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}
