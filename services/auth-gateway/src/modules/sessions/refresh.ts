import { DependencyUnavailableError } from '@tessera/contracts';
import { GatewayError } from '../../errors.ts';
import type { ClientInfo } from '../security-events/security-events.ts';
import { generateRefreshToken, hashRefreshToken } from '../tokens/refresh-token.ts';
import type { TokenPair } from '../tokens/schemas.ts';
import { refreshes, sessionsEnded } from './metrics.ts';
import { type SessionsContext, seconds, tokenPair } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

const RESULTS = { rotated: 'ok', again: 'grace', reused: 'reuse', invalid: 'invalid', ended: 'invalid' };
/** How many rotations after its own a retry's answer follows (each one a refresh within the window). */
const MAX_LINKS = 8;

type Outcome =
  | { kind: 'rotated' | 'again'; pair: TokenPair }
  | { kind: 'invalid' }
  | { kind: 'ended'; sessionId: string }
  | { kind: 'reused'; sessionId: string; userId: string; rotatedAt: Date };

/**
 * Rotates a refresh token. Presenting an already rotated token again returns the same successor
 * (or the newest, when that was rotated too) within the grace window (parallel tabs) and ends the
 * whole session after it (theft).
 */
export function refreshSession(context: SessionsContext) {
  const { db, clock, activeSessions, securityLog, log, successors } = context;

  /** The rotation, in one statement; then the session's key follows the session's new expiry. */
  async function rotate(presented: string, now: Date): Promise<Outcome | undefined> {
    const successor = generateRefreshToken();
    const expiresAt = new Date(now.getTime() + seconds(context.refreshTokenTtl));
    const rotated = await repository.rotateRefreshToken(db, {
      tokenHash: hashRefreshToken(presented),
      successorHash: hashRefreshToken(successor),
      successorSealed: successors.seal(presented, successor),
      now,
      expiresAt,
    });
    if (!rotated) return undefined;
    const { sessionId, userId, roles } = rotated;
    try {
      if (!(await followedByKey(sessionId, userId, expiresAt, now))) return { kind: 'ended', sessionId };
    } catch (err) {
      // The rotation is committed: answering 503 would leave the client with the token it replaced,
      // which becomes a reuse (the session ended as stolen) once REFRESH_REUSE_GRACE has passed,
      // however long Redis is away. So the pair goes out, unless the session has ended meanwhile
      // (a revocation or a reuse whose key delete Redis failed too). Its access token is refused
      // while Redis is away, and a key left unextended expires early: the client refreshes again.
      if (!(err instanceof DependencyUnavailableError && err.dependency === 'redis')) throw err;
      if (!(await isOpen(sessionId, userId))) return { kind: 'ended', sessionId };
      log.warn({ sessionId }, "redis unavailable: refreshed without moving the session's key");
    }
    return {
      kind: 'rotated',
      pair: tokenPair(context, { sub: userId, sid: sessionId, roles }, successor, now),
    };
  }

  /** Whether the session's key follows its new expiry; false when the session has ended meanwhile. */
  async function followedByKey(sessionId: string, userId: string, expiresAt: Date, now: Date) {
    // Only an existing key is extended: a revocation since the rotation deleted it, and it stays deleted.
    if (await activeSessions.assign(sessionId, userId, expiresAt, now)) return true;
    // Gone: a revocation deleted it, or Redis lost it. Written empty first, as a sign-in does (no
    // token passes it), then the session looked at, then given its user if still there: a revocation
    // deletes it before this look (seen here) or after (the last write finds no key; looked at again).
    await activeSessions.reserve(sessionId, expiresAt, now);
    if (!(await isOpen(sessionId, userId))) return false;
    if (await activeSessions.assign(sessionId, userId, expiresAt, now)) return true;
    // Gone again (Redis lost it twice): the pair goes out without the key, unless the session ended.
    if (!(await isOpen(sessionId, userId))) return false;
    log.warn({ sessionId }, "redis lost the session's key twice: refreshed without it");
    return true;
  }

  async function isOpen(sessionId: string, userId: string) {
    const session = await repository.findUserSession(db, userId, sessionId);
    return session !== undefined && !session.endedAt;
  }

  function opened(presented: string, sealed: Buffer): string | undefined {
    try {
      return successors.open(presented, sealed);
    } catch {
      log.warn({}, "a rotated token's successor did not open: OTP_SECRET differs from its sealer's");
      return undefined;
    }
  }

  /**
   * The pair to give again for a successor: its own, or, when it was rotated in turn (a client that
   * refreshed again within the window), the newest of the session's chain of rotations, so that a
   * retry is not handed a token already rotated away, which its holder would present later and have
   * taken for theft. Each later rotation came after the presented token's, within its window (judged
   * once, there: measured again a moment later, a link could seem just outside), and sealed its
   * successor beside it. Nothing is given again past a seal that does not open (OTP_SECRET changed
   * within the window), as for the presented token's own, or past MAX_LINKS rotations.
   */
  async function newestOf(successor: string): Promise<{ token: string; issuedAt: Date } | undefined> {
    let token = successor;
    for (let link = 0; ; link++) {
      const row = await repository.findRefreshToken(db, hashRefreshToken(token));
      if (!row) return undefined;
      if (!row.successorSealed) return { token, issuedAt: row.issuedAt };
      const next = link < MAX_LINKS ? opened(token, row.successorSealed) : undefined;
      if (next === undefined) return undefined;
      token = next;
    }
  }

  /** Why a token was not rotated: unknown or expired, its session ended, or rotated before. */
  async function notRotated(presented: string, now: Date): Promise<Outcome> {
    const token = await repository.findRefreshToken(db, hashRefreshToken(presented));
    if (!token || (!token.rotatedAt && token.expiresAt <= now)) return { kind: 'invalid' };
    if (token.sessionEndedAt) return { kind: 'ended', sessionId: token.sessionId };
    // Rotatable, yet the statement did not rotate it: it did not exist in the statement's snapshot.
    if (!token.rotatedAt) return { kind: 'invalid' };
    // Measured on Postgres's clock alone, so gateways whose clocks differ judge a retry alike. (A
    // rotation that seems to lie ahead, its clock stepped back since, is a retry: no false theft.)
    const sinceRotation = token.secondsSinceRotation ?? Number.POSITIVE_INFINITY;
    if (token.successorSealed && sinceRotation <= context.refreshReuseGrace) {
      const successor = opened(presented, token.successorSealed);
      // Sealed under another OTP_SECRET (changed within the window): it cannot be given again.
      if (successor === undefined) return { kind: 'invalid' };
      const newest = await newestOf(successor);
      if (!newest) return { kind: 'invalid' };
      // The same pair: signed as at its rotation, when the rotating gateway issued it.
      const claims = { sub: token.userId, sid: token.sessionId, roles: token.roles };
      return { kind: 'again', pair: tokenPair(context, claims, newest.token, newest.issuedAt, now) };
    }
    // Two reuses at once: one ends the session, the other finds it ended.
    if (!(await repository.endSession(db, token.sessionId, now, 'refresh_token_reuse')))
      return { kind: 'ended', sessionId: token.sessionId };
    return { kind: 'reused', sessionId: token.sessionId, userId: token.userId, rotatedAt: token.rotatedAt };
  }

  return async (presented: string, client: ClientInfo): Promise<TokenPair> => {
    const now = clock.now();
    const outcome = (await rotate(presented, now)) ?? (await notRotated(presented, now));

    refreshes.add(1, { result: RESULTS[outcome.kind] });
    switch (outcome.kind) {
      case 'invalid':
        throw new GatewayError('REFRESH_TOKEN_INVALID');
      case 'ended':
        // Repeated at every sighting, so a revocation whose Redis delete failed still takes hold.
        await activeSessions.remove([outcome.sessionId]);
        throw new GatewayError('REFRESH_TOKEN_INVALID');
      case 'reused':
        sessionsEnded.add(1, { reason: 'refresh_token_reuse' });
        log.warn(
          { sessionId: outcome.sessionId, userId: outcome.userId, ip: client.ipAddress },
          'refresh token reuse detected: session ended',
        );
        // Side by side: a Redis that fails the key's delete (503) leaves the alarm recorded, and a
        // slow Postgres does not hold up the delete.
        await Promise.all([
          securityLog.recordAfter({
            type: 'refresh_reuse',
            userId: outcome.userId,
            sessionId: outcome.sessionId,
            client,
            details: { rotatedAt: outcome.rotatedAt.toISOString() },
            at: now,
          }),
          activeSessions.remove([outcome.sessionId]),
        ]);
        throw new GatewayError('REFRESH_TOKEN_REUSED');
      case 'rotated':
      case 'again':
        return outcome.pair;
    }
  };
}
