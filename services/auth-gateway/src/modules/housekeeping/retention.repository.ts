import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from '../../database.ts';

/**
 * Deletes up to `limit` rows of `table` that match `where`. Rows another process is deleting are
 * skipped, so several gateways share the work.
 */
async function deleteBatch(
  db: Kysely<Database>,
  table: keyof Database,
  key: string,
  where: RawBuilder<unknown>,
  limit: number,
): Promise<number> {
  const result = await sql`
    delete from ${sql.table(table)} where ${sql.ref(key)} in (
      select ${sql.ref(key)} from ${sql.table(table)}
      where ${where}
      limit ${limit} for update skip locked)`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * Sessions that ended or expired before `before`, with their refresh tokens (foreign key cascade);
 * their security events keep their row and the session's id. An open session's current refresh token
 * (never rotated) expires with it, so its index finds expired sessions: `sessions.expires_at` has
 * none, since every refresh sets it.
 */
export async function deleteOldSessions(db: Kysely<Database>, before: Date, limit: number): Promise<number> {
  const ended = await deleteBatch(db, 'sessions', 'id', sql`ended_at < ${before}`, limit);
  const expired = await sql`
    delete from sessions where id in (
      select s.id from refresh_tokens t join sessions s on s.id = t.session_id
      where t.expires_at < ${before} and t.rotated_at is null and s.expires_at < ${before}
      limit ${limit} for update of s skip locked)`.execute(db);
  return ended + Number(expired.numAffectedRows ?? 0n);
}

/**
 * Rotated refresh tokens that expired before `before`. A session's current token goes with its
 * session, which it finds for the sweep until then.
 */
export const deleteOldRefreshTokens = (db: Kysely<Database>, before: Date, limit: number) =>
  deleteBatch(
    db,
    'refreshTokens',
    'tokenHash',
    sql`expires_at < ${before} and rotated_at is not null`,
    limit,
  );

/** Security events recorded before `before`. */
export const deleteOldSecurityEvents = (db: Kysely<Database>, before: Date, limit: number) =>
  deleteBatch(db, 'securityEvents', 'id', sql`created_at < ${before}`, limit);
