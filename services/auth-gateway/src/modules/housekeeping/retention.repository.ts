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
 * their security events keep their row, with no session.
 */
export const deleteOldSessions = (db: Kysely<Database>, before: Date, limit: number) =>
  deleteBatch(db, 'sessions', 'id', sql`expires_at < ${before} or ended_at < ${before}`, limit);

/** Refresh tokens that expired before `before`, of sessions still kept. */
export const deleteOldRefreshTokens = (db: Kysely<Database>, before: Date, limit: number) =>
  deleteBatch(db, 'refreshTokens', 'tokenHash', sql`expires_at < ${before}`, limit);

/** Security events recorded before `before`. */
export const deleteOldSecurityEvents = (db: Kysely<Database>, before: Date, limit: number) =>
  deleteBatch(db, 'securityEvents', 'id', sql`created_at < ${before}`, limit);
