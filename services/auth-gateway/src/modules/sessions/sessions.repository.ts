import type { Kysely, Selectable, Transaction } from 'kysely';
import type { Database, SessionsTable } from '../../database.ts';

export type SessionRow = Selectable<SessionsTable>;

export type SessionEndReason =
  | 'revoked'
  | 'signed_out'
  | 'logout'
  | 'refresh_token_reuse'
  | 'account_deleted';

export async function insertSession(
  trx: Transaction<Database>,
  values: { userId: string; ipAddress: string | null; userAgent: string | null; now: Date; expiresAt: Date },
): Promise<string> {
  const { id } = await trx
    .insertInto('sessions')
    .values({
      userId: values.userId,
      ipAddress: values.ipAddress,
      userAgent: values.userAgent,
      createdAt: values.now,
      lastUsedAt: values.now,
      expiresAt: values.expiresAt,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return id;
}

export async function insertRefreshToken(
  trx: Transaction<Database>,
  values: { tokenHash: Buffer; sessionId: string; issuedAt: Date; expiresAt: Date },
): Promise<void> {
  await trx.insertInto('refreshTokens').values(values).execute();
}

function selectRefreshToken(db: Kysely<Database>, tokenHash: Buffer) {
  return db
    .selectFrom('refreshTokens as t')
    .innerJoin('sessions as s', 's.id', 't.sessionId')
    .innerJoin('users as u', 'u.id', 's.userId')
    .select([
      't.sessionId',
      't.expiresAt',
      't.rotatedAt',
      't.successorSealed',
      's.userId',
      's.endedAt as sessionEndedAt',
      'u.roles',
    ])
    .where('t.tokenHash', '=', tokenHash);
}

/** A refresh token with its session and user. */
export function findRefreshToken(db: Kysely<Database>, tokenHash: Buffer) {
  return selectRefreshToken(db, tokenHash).executeTakeFirst();
}

/**
 * The same, locking the session row: refreshes, reuse detection and revocation of one session take
 * turns. The token row is locked too, so that a refresh that waited reads the token as the one before
 * it left it (rotated): Postgres re-reads only the locked rows of a join after such a wait.
 */
export function findRefreshTokenForUpdate(trx: Transaction<Database>, tokenHash: Buffer) {
  return selectRefreshToken(trx, tokenHash).forUpdate(['t', 's']).executeTakeFirst();
}

export async function markRotated(
  trx: Transaction<Database>,
  tokenHash: Buffer,
  rotatedAt: Date,
  successorSealed: Buffer,
): Promise<void> {
  await trx
    .updateTable('refreshTokens')
    .set({ rotatedAt, successorSealed })
    .where('tokenHash', '=', tokenHash)
    .execute();
}

export async function touchSession(
  trx: Transaction<Database>,
  sessionId: string,
  lastUsedAt: Date,
  expiresAt: Date,
): Promise<void> {
  await trx.updateTable('sessions').set({ lastUsedAt, expiresAt }).where('id', '=', sessionId).execute();
}

/** Ends a session if it is still open; returns whether this call ended it. */
export async function endSession(
  db: Kysely<Database>,
  sessionId: string,
  endedAt: Date,
  reason: SessionEndReason,
): Promise<boolean> {
  const result = await db
    .updateTable('sessions')
    .set({ endedAt, endReason: reason })
    .where('id', '=', sessionId)
    .where('endedAt', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Ends every open session of a user; returns their ids. */
export async function endUserSessions(
  db: Kysely<Database>,
  userId: string,
  endedAt: Date,
  reason: SessionEndReason,
): Promise<string[]> {
  const rows = await db
    .updateTable('sessions')
    .set({ endedAt, endReason: reason })
    .where('userId', '=', userId)
    .where('endedAt', 'is', null)
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

export async function unexpiredSessionIds(
  db: Kysely<Database>,
  userId: string,
  now: Date,
): Promise<string[]> {
  const rows = await db
    .selectFrom('sessions')
    .select('id')
    .where('userId', '=', userId)
    .where('expiresAt', '>', now)
    .execute();
  return rows.map((r) => r.id);
}

export function findUserSession(db: Kysely<Database>, userId: string, sessionId: string) {
  return db
    .selectFrom('sessions')
    .selectAll()
    .where('id', '=', sessionId)
    .where('userId', '=', userId)
    .executeTakeFirst();
}

const activeSessionsOf = (db: Kysely<Database>, userId: string, now: Date) =>
  db
    .selectFrom('sessions')
    .where('userId', '=', userId)
    .where('endedAt', 'is', null)
    .where('expiresAt', '>', now);

export async function countActiveSessions(db: Kysely<Database>, userId: string, now: Date): Promise<number> {
  const { count } = await activeSessionsOf(db, userId, now)
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(count);
}

/** Newest first; `id` breaks ties so pages never repeat or skip a session. */
export function listActiveSessions(
  db: Kysely<Database>,
  userId: string,
  now: Date,
  page: { limit: number; offset: number },
): Promise<SessionRow[]> {
  return activeSessionsOf(db, userId, now)
    .selectAll()
    .orderBy('createdAt', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
}
