import { DependencyUnavailableError } from '@tessera/contracts';
import { type ErrorCode, GatewayError } from '../../errors.ts';
import type { SecurityEventType } from '../security-events/event-types.ts';
import type { ClientInfo } from '../security-events/security-events.ts';
import { hashRefreshToken } from '../tokens/refresh-token.ts';
import { sessionsEnded } from './metrics.ts';
import type { SessionsContext } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

export interface EndedSession {
  sessionId: string;
  revokedAt: Date;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A session as the ending statement found it, and whether that statement ended it. */
interface Found {
  sessionId: string;
  endedAt: Date | null;
  ended: boolean;
}

/**
 * After the statement that ended the session (with its `session_revoked` event) or found it not
 * open: its Redis key goes, also when it had ended before, so a retry after a failed delete still
 * revokes; a session this call did not end answers `conflict`.
 */
async function afterEnding(
  { activeSessions }: SessionsContext,
  found: Found,
  how: { reason: 'revoked' | 'signed_out'; conflict: ErrorCode },
  now: Date,
): Promise<EndedSession> {
  if (found.ended || found.endedAt) await activeSessions.remove([found.sessionId]);
  if (!found.ended) throw new GatewayError(how.conflict);
  sessionsEnded.add(1, { reason: how.reason });
  return { sessionId: found.sessionId, revokedAt: now };
}

/**
 * An ending statement with its security event; when that statement fails on anything but an outage
 * (the event's row refused), once more without the event, which is logged as not recorded: the
 * user's action stands without its record.
 */
async function withEvent<T>(
  { log }: SessionsContext,
  type: SecurityEventType,
  run: (event: boolean) => Promise<T>,
): Promise<T> {
  try {
    return await run(true);
  } catch (err) {
    if (err instanceof DependencyUnavailableError) throw err;
    log.error({ err, event: type }, 'could not record a security event');
    return run(false);
  }
}

/** Ends the session a refresh token belongs to, on behalf of its owner. */
export function revokeByRefreshToken(context: SessionsContext) {
  return async (userId: string, presented: string, client: ClientInfo): Promise<EndedSession> => {
    const now = context.clock.now();
    const values = {
      tokenHash: hashRefreshToken(presented),
      userId,
      ...client,
      now,
      reason: 'revoked',
      details: JSON.stringify({ via: 'refresh_token' }),
    } as const;
    const found = await withEvent(context, 'session_revoked', (event) =>
      repository.revokeSessionByToken(context.db, values, event),
    );
    if (!found) throw new GatewayError('REFRESH_TOKEN_NOT_FOUND');
    if (found.userId !== userId) throw new GatewayError('REFRESH_TOKEN_FOREIGN');
    return afterEnding(context, found, { reason: 'revoked', conflict: 'REFRESH_TOKEN_NOT_ACTIVE' }, now);
  };
}

/** Ends one of the user's sessions by id ("sign out that device"). */
export function endSessionById(context: SessionsContext) {
  return async (userId: string, sessionId: string, client: ClientInfo): Promise<EndedSession> => {
    if (!UUID.test(sessionId)) throw new GatewayError('SESSION_NOT_FOUND');
    const now = context.clock.now();
    const values = {
      sessionId,
      userId,
      ...client,
      now,
      reason: 'signed_out',
      details: JSON.stringify({ via: 'session_id' }),
    } as const;
    const found = await withEvent(context, 'session_revoked', (event) =>
      repository.endSessionOfUser(context.db, values, event),
    );
    if (!found) throw new GatewayError('SESSION_NOT_FOUND');
    return afterEnding(context, found, { reason: 'signed_out', conflict: 'SESSION_ALREADY_ENDED' }, now);
  };
}

/** Ends every session of the user, with the `logout` event, in one statement; returns how many were open. */
export function logoutEverywhere(context: SessionsContext) {
  const { db, clock, activeSessions } = context;
  return async (userId: string, client: ClientInfo): Promise<number> => {
    const values = { userId, ...client, now: clock.now() };
    const { ended, unexpired } = await withEvent(context, 'logout', (event) =>
      repository.logoutEverywhere(db, values, event),
    );
    // Every unexpired session's key, not only those ended now: a retry repairs a failed delete.
    await activeSessions.remove(unexpired);
    sessionsEnded.add(ended, { reason: 'logout' });
    return ended;
  };
}
