import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from '../../database.ts';

/**
 * Deletes up to `limit` rows of `table` that match `where`, oldest first by `order`, whose index
 * finds them: read in any order, a batch would scan the table past the rows earlier batches left
 * dead, longer at each batch of a big backlog. The rows are then deleted by their keys (`= any`, one
 * index probe each, never a join that may read the whole table). Rows another process is deleting
 * are skipped, so several gateways share the work.
 */
async function deleteBatch(
  db: Kysely<Database>,
  table: keyof Database,
  key: string,
  where: RawBuilder<unknown>,
  order: string,
  limit: number,
): Promise<number> {
  const result = await sql`
    delete from ${sql.table(table)} where ${sql.ref(key)} = any(array(
      select ${sql.ref(key)} from ${sql.table(table)}
      where ${where}
      order by ${sql.ref(order)}
      limit ${limit} for update skip locked))`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * Sessions that ended or expired before `before`, with their refresh tokens (foreign key cascade);
 * their security events keep their row and the session's id. An open session's current refresh token
 * (never rotated) expires with it, so its index finds expired sessions: `sessions.expires_at` has
 * none, since every refresh sets it.
 */
export async function deleteOldSessions(db: Kysely<Database>, before: Date, limit: number): Promise<number> {
  const ended = await deleteBatch(db, 'sessions', 'id', sql`ended_at < ${before}`, 'ended_at', limit);
  const expired = await sql`
    delete from sessions where id = any(array(
      select s.id from refresh_tokens t join sessions s on s.id = t.session_id
      where t.expires_at < ${before} and t.rotated_at is null and s.expires_at < ${before}
      order by t.expires_at
      limit ${limit} for update of s skip locked))`.execute(db);
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
    'expires_at',
    limit,
  );

/** Security events recorded before `before`. */
export const deleteOldSecurityEvents = (db: Kysely<Database>, before: Date, limit: number) =>
  deleteBatch(db, 'securityEvents', 'id', sql`created_at < ${before}`, 'created_at', limit);
