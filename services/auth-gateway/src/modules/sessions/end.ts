import { DependencyUnavailableError } from '@tessera/contracts';
import { type ErrorCode, GatewayError } from '../../errors.ts';
import { isUuid } from '../../uuid.ts';
import type { SecurityEventType } from '../security-events/event-types.ts';
import { type ClientInfo, eventLost } from '../security-events/security-events.ts';
import { hashRefreshToken } from '../tokens/refresh-token.ts';
import { sessionsEnded } from './metrics.ts';
import type { SessionsContext } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

export interface EndedSession {
  sessionId: string;
  revokedAt: Date;
}

/** A session as the ending statement found it, and whether that statement ended it. */
interface Found {
  sessionId: string;
  endedAt: Date | null;
  ended: boolean;
}

/** Why one session ends, how its event tells it, and the refusal when it was not open. */
interface How {
  reason: 'revoked' | 'signed_out';
  via: string;
  conflict: ErrorCode;
}
const BY_REFRESH_TOKEN: How = {
  reason: 'revoked',
  via: 'refresh_token',
  conflict: 'REFRESH_TOKEN_NOT_ACTIVE',
};
const BY_SESSION_ID: How = { reason: 'signed_out', via: 'session_id', conflict: 'SESSION_ALREADY_ENDED' };

/**
 * Whether Postgres refused the statement for want of disk (SQLSTATE 53100), which an ending without
 * its event may not need: the event is a new row, which may need a new page, where the ending
 * updates its session's row in place.
 */
const diskFull = (err: DependencyUnavailableError) =>
  (err.cause as { code?: unknown } | undefined)?.code === '53100';

/**
 * An ending statement with its security event; when that statement fails on anything but an outage
 * (the event's row refused, or the disk full for it), once more without the event, which
 * is logged as not recorded: the user's action stands without its record.
 */
async function withEvent<T>(
  { log }: Pick<SessionsContext, 'log'>,
  type: SecurityEventType,
  run: (event: boolean) => Promise<T>,
): Promise<T> {
  try {
    return await run(true);
  } catch (err) {
    if (err instanceof DependencyUnavailableError && !diskFull(err)) throw err;
    // Lost only once the action, run again without it, stood.
    const result = await run(false);
    eventLost(log, err, type);
    return result;
  }
}

/**
 * Runs `end`, a statement that finds one session, ends it if it is open and `userId`'s and writes its
 * `session_revoked` event, with the values of this ending. Answers what it found, and when.
 */
async function endOne<F>(
  context: SessionsContext,
  userId: string,
  client: ClientInfo,
  how: How,
  end: (values: repository.EndOne, event: boolean) => Promise<F>,
): Promise<{ found: F; now: Date }> {
  const now = context.clock.now();
  const values = { userId, ...client, now, reason: how.reason, details: JSON.stringify({ via: how.via }) };
  return { found: await withEvent(context, 'session_revoked', (event) => end(values, event)), now };
}

/**
 * After the statement that ended the session or found it not open: its Redis key goes, also when it
 * had ended before, so a retry after a failed delete still revokes; a session this call did not end
 * answers `conflict`.
 */
async function afterEnding(
  { activeSessions }: SessionsContext,
  found: Found,
  how: How,
  now: Date,
): Promise<EndedSession> {
  if (found.ended || found.endedAt) await activeSessions.remove([found.sessionId]);
  if (!found.ended) throw new GatewayError(how.conflict);
  sessionsEnded.add(1, { reason: how.reason });
  return { sessionId: found.sessionId, revokedAt: now };
}

/** Ends the session a refresh token belongs to, on behalf of its owner. */
export function revokeByRefreshToken(context: SessionsContext) {
  return async (userId: string, presented: string, client: ClientInfo): Promise<EndedSession> => {
    const tokenHash = hashRefreshToken(presented);
    const { found, now } = await endOne(context, userId, client, BY_REFRESH_TOKEN, (values, event) =>
      repository.revokeSessionByToken(context.db, { ...values, tokenHash }, event),
    );
    if (!found) throw new GatewayError('REFRESH_TOKEN_NOT_FOUND');
    if (found.userId !== userId) throw new GatewayError('REFRESH_TOKEN_FOREIGN');
    return afterEnding(context, found, BY_REFRESH_TOKEN, now);
  };
}

/** Ends one of the user's sessions by id ("sign out that device"). */
export function endSessionById(context: SessionsContext) {
  return async (userId: string, sessionId: string, client: ClientInfo): Promise<EndedSession> => {
    if (!isUuid(sessionId)) throw new GatewayError('SESSION_NOT_FOUND');
    const { found, now } = await endOne(context, userId, client, BY_SESSION_ID, (values, event) =>
      repository.endSessionOfUser(context.db, { ...values, sessionId }, event),
    );
    if (!found) throw new GatewayError('SESSION_NOT_FOUND');
    return afterEnding(context, found, BY_SESSION_ID, now);
  };
}

/**
 * Ends every session of the user, with the `logout` event when it ended any, in one statement;
 * returns how many were open, and how many Redis keys of its unexpired sessions it deleted. The event
 * names the session that asked; an operator's command gives no session and no address, and may leave
 * the sessions started after `startedBefore`.
 */
export function logoutEverywhere(context: Pick<SessionsContext, 'db' | 'clock' | 'activeSessions' | 'log'>) {
  const { db, clock, activeSessions } = context;
  return async (
    userId: string,
    asker: (ClientInfo & { sessionId: string }) | { ipAddress: null; userAgent: string; sessionId: null },
    startedBefore: Date | null = null,
  ): Promise<{ ended: number; keysDeleted: number }> => {
    const values = { userId, ...asker, now: clock.now(), startedBefore };
    const { ended, unexpired } = await withEvent(context, 'logout', (event) =>
      repository.logoutEverywhere(db, values, event),
    );
    // Every unexpired session's key, not only those ended now: a retry repairs a failed delete.
    const keysDeleted = await activeSessions.remove(unexpired);
    sessionsEnded.add(ended, { reason: 'logout' });
    return { ended, keysDeleted };
  };
}
