import { GatewayError } from '../../errors.ts';
import type { ClientInfo } from '../security-events/security-events.ts';
import {
  generateRefreshToken,
  hashRefreshToken,
  openSuccessor,
  sealSuccessor,
} from '../tokens/refresh-token.ts';
import type { TokenPair } from '../tokens/schemas.ts';
import { refreshes, sessionsEnded } from './metrics.ts';
import { type SessionsContext, seconds, tokenPair } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

const RESULTS = { rotated: 'ok', again: 'grace', reused: 'reuse', invalid: 'invalid', ended: 'invalid' };

/**
 * Rotates a refresh token. Presenting an already rotated token again returns the same successor
 * within the grace window (parallel tabs) and ends the whole session after it (theft).
 */
export function refreshSession(context: SessionsContext) {
  const { db, clock, activeSessions, securityLog, log } = context;
  return async (presented: string, client: ClientInfo): Promise<TokenPair> => {
    const now = clock.now();
    const outcome = await db.transaction().execute(async (trx) => {
      const token = await repository.findRefreshTokenForUpdate(trx, hashRefreshToken(presented));
      if (!token || (!token.rotatedAt && token.expiresAt <= now)) return { kind: 'invalid' } as const;
      if (token.sessionEndedAt) return { kind: 'ended', sessionId: token.sessionId } as const;
      const claims = { sub: token.userId, sid: token.sessionId, roles: token.roles };
      if (token.rotatedAt) {
        const sinceRotation = now.getTime() - token.rotatedAt.getTime();
        if (token.successorSealed && sinceRotation <= seconds(context.refreshReuseGrace)) {
          const successor = openSuccessor(presented, token.successorSealed);
          return { kind: 'again', pair: tokenPair(context, claims, successor, token.rotatedAt) } as const;
        }
        await repository.endSession(trx, token.sessionId, now, 'refresh_token_reuse');
        return {
          kind: 'reused',
          sessionId: token.sessionId,
          userId: token.userId,
          rotatedAt: token.rotatedAt,
        } as const;
      }
      const successor = generateRefreshToken();
      const expiresAt = new Date(now.getTime() + seconds(context.refreshTokenTtl));
      await repository.markRotated(
        trx,
        hashRefreshToken(presented),
        now,
        sealSuccessor(presented, successor),
      );
      await repository.insertRefreshToken(trx, {
        tokenHash: hashRefreshToken(successor),
        sessionId: token.sessionId,
        issuedAt: now,
        expiresAt,
      });
      await repository.touchSession(trx, token.sessionId, now, expiresAt);
      // Inside the transaction, under the session's row lock: a revocation waiting on that lock
      // deletes the key after this write, never before it.
      await activeSessions.markActive(token.sessionId, expiresAt, now);
      return { kind: 'rotated', pair: tokenPair(context, claims, successor, now) } as const;
    });

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
        await activeSessions.remove([outcome.sessionId]);
        await securityLog.recordAfter({
          type: 'refresh_reuse',
          userId: outcome.userId,
          sessionId: outcome.sessionId,
          client,
          details: { rotatedAt: outcome.rotatedAt.toISOString() },
          at: now,
        });
        throw new GatewayError('REFRESH_TOKEN_REUSED');
      case 'rotated':
      case 'again':
        return outcome.pair;
    }
  };
}
