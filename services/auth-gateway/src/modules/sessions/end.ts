import { type ErrorCode, GatewayError } from '../../errors.ts';
import type { ClientInfo } from '../security-events/security-events.ts';
import { hashRefreshToken } from '../tokens/refresh-token.ts';
import { sessionsEnded } from './metrics.ts';
import type { SessionsContext } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

export interface EndedSession {
  sessionId: string;
  revokedAt: Date;
}

interface Target {
  userId: string;
  sessionId: string;
  /** Still open and unexpired as the caller found it. */
  open: boolean;
  /** Ended before this call. */
  endedBefore: boolean;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Ends one session if it is still open, else answers `conflict`. Its Redis key goes also when it had
 * ended before, so a retry after a failed delete still revokes.
 */
async function endOne(
  { db, activeSessions, securityLog }: SessionsContext,
  target: Target,
  how: { reason: 'revoked' | 'signed_out'; via: string; conflict: ErrorCode },
  client: ClientInfo,
  now: Date,
): Promise<EndedSession> {
  const ended = target.open && (await repository.endSession(db, target.sessionId, now, how.reason));
  if (ended || target.endedBefore) await activeSessions.remove([target.sessionId]);
  if (!ended) throw new GatewayError(how.conflict);
  sessionsEnded.add(1, { reason: how.reason });
  const { userId, sessionId } = target;
  await securityLog.recordAfter({
    type: 'session_revoked',
    userId,
    sessionId,
    client,
    details: { via: how.via },
    at: now,
  });
  return { sessionId, revokedAt: now };
}

/** Ends the session a refresh token belongs to, on behalf of its owner. */
export function revokeByRefreshToken(context: SessionsContext) {
  return async (userId: string, presented: string, client: ClientInfo): Promise<EndedSession> => {
    const now = context.clock.now();
    const token = await repository.findRefreshToken(context.db, hashRefreshToken(presented));
    if (!token) throw new GatewayError('REFRESH_TOKEN_NOT_FOUND');
    if (token.userId !== userId) throw new GatewayError('REFRESH_TOKEN_FOREIGN');
    const open = !token.sessionEndedAt && !token.rotatedAt && token.expiresAt > now;
    const target = { userId, sessionId: token.sessionId, open, endedBefore: Boolean(token.sessionEndedAt) };
    const how = { reason: 'revoked', via: 'refresh_token', conflict: 'REFRESH_TOKEN_NOT_ACTIVE' } as const;
    return endOne(context, target, how, client, now);
  };
}

/** Ends one of the user's sessions by id ("sign out that device"). */
export function endSessionById(context: SessionsContext) {
  return async (userId: string, sessionId: string, client: ClientInfo): Promise<EndedSession> => {
    const now = context.clock.now();
    const session = UUID.test(sessionId)
      ? await repository.findUserSession(context.db, userId, sessionId)
      : undefined;
    if (!session) throw new GatewayError('SESSION_NOT_FOUND');
    const open = !session.endedAt && session.expiresAt > now;
    const target = { userId, sessionId, open, endedBefore: Boolean(session.endedAt) };
    const how = { reason: 'signed_out', via: 'session_id', conflict: 'SESSION_ALREADY_ENDED' } as const;
    return endOne(context, target, how, client, now);
  };
}

/** Ends every session of the user; returns how many were open. */
export function logoutEverywhere({ db, clock, activeSessions, securityLog }: SessionsContext) {
  return async (userId: string, client: ClientInfo): Promise<number> => {
    const now = clock.now();
    const ended = await repository.endUserSessions(db, userId, now, 'logout');
    // Every unexpired session's key, not only those ended now: a retry repairs a failed delete.
    await activeSessions.remove(await repository.unexpiredSessionIds(db, userId, now));
    sessionsEnded.add(ended.length, { reason: 'logout' });
    await securityLog.recordAfter({
      type: 'logout',
      userId,
      client,
      details: { revokedSessions: ended.length },
      at: now,
    });
    return ended.length;
  };
}
