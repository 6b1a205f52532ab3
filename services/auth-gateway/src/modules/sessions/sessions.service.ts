import { AppError, type PaginationQuery, pageOffset, paginationMeta } from '@tessera/contracts';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import { refreshes, sessionsEnded } from '../../metrics.ts';
import {
  type ClientInfo,
  recordSecurityEvent,
  recordSecurityEventSafely,
  type SecurityEvent,
} from '../security-events/security-events.ts';
import {
  generateRefreshToken,
  hashRefreshToken,
  openSuccessor,
  sealSuccessor,
} from '../tokens/refresh-token.ts';
import type { AccessClaims, TokenService } from '../tokens/tokens.service.ts';
import type { ActiveSessionStore } from './active-sessions.store.ts';
import * as repository from './sessions.repository.ts';

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  refreshExpiresIn: number;
}

export interface SessionsServiceOptions {
  db: Kysely<Database>;
  activeSessions: ActiveSessionStore;
  tokens: TokenService;
  clock: Clock;
  log: FastifyBaseLogger;
  accessTokenTtl: number;
  refreshTokenTtl: number;
  refreshReuseGrace: number;
}

export type SessionsService = ReturnType<typeof createSessionsService>;

const seconds = (n: number) => n * 1000;
const REFRESH_RESULTS = {
  rotated: 'ok',
  again: 'grace',
  reused: 'reuse',
  invalid: 'invalid',
  ended: 'invalid',
};
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Sessions and their tokens: sign-in starts one, refresh rotates its token, revoke and logout end it. */
export function createSessionsService(options: SessionsServiceOptions) {
  const { db, activeSessions, tokens, clock, log } = options;
  // What ends a session is done first; its record must not undo it.
  const record = (event: SecurityEvent) => recordSecurityEventSafely(db, log, event);

  function tokenPair(claims: AccessClaims, refreshToken: string, issuedAt: Date): TokenPair {
    return {
      accessToken: tokens.signAccessToken(claims, issuedAt),
      refreshToken,
      expiresIn: options.accessTokenTtl,
      refreshExpiresIn: options.refreshTokenTtl,
    };
  }

  return {
    /** One sign-in, one session, recorded with the client's IP and user agent. */
    async start(user: { id: string; roles: string[] }, client: ClientInfo): Promise<TokenPair> {
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + seconds(options.refreshTokenTtl));
      const refreshToken = generateRefreshToken();
      const sessionId = await db.transaction().execute(async (trx) => {
        const id = await repository.insertSession(trx, { userId: user.id, ...client, now, expiresAt });
        await repository.insertRefreshToken(trx, {
          tokenHash: hashRefreshToken(refreshToken),
          sessionId: id,
          issuedAt: now,
          expiresAt,
        });
        await recordSecurityEvent(trx, { type: 'sign_in', userId: user.id, sessionId: id, client, at: now });
        await activeSessions.markActive(id, expiresAt, now);
        return id;
      });
      return tokenPair({ sub: user.id, sid: sessionId, roles: user.roles }, refreshToken, now);
    },

    /**
     * Rotates a refresh token. Presenting an already rotated token again returns the same successor
     * within the grace window (parallel tabs) and ends the whole session after it (theft).
     */
    async refresh(presented: string, client: ClientInfo): Promise<TokenPair> {
      const now = clock.now();
      const outcome = await db.transaction().execute(async (trx) => {
        const token = await repository.findRefreshTokenForUpdate(trx, hashRefreshToken(presented));
        if (!token || (!token.rotatedAt && token.expiresAt <= now)) return { kind: 'invalid' } as const;
        if (token.sessionEndedAt) return { kind: 'ended', sessionId: token.sessionId } as const;
        const claims = { sub: token.userId, sid: token.sessionId, roles: token.roles };
        if (token.rotatedAt) {
          const sinceRotation = now.getTime() - token.rotatedAt.getTime();
          if (token.successorSealed && sinceRotation <= seconds(options.refreshReuseGrace)) {
            const successor = openSuccessor(presented, token.successorSealed);
            return { kind: 'again', pair: tokenPair(claims, successor, token.rotatedAt) } as const;
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
        const expiresAt = new Date(now.getTime() + seconds(options.refreshTokenTtl));
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
        return { kind: 'rotated', pair: tokenPair(claims, successor, now) } as const;
      });

      refreshes.add(1, { result: REFRESH_RESULTS[outcome.kind] });
      if (outcome.kind === 'reused') sessionsEnded.add(1, { reason: 'refresh_token_reuse' });
      switch (outcome.kind) {
        case 'invalid':
          throw new AppError(401, 'REFRESH_TOKEN_INVALID', ['Refresh token is invalid, expired or revoked']);
        case 'ended':
          // Repeated at every sighting, so a revocation whose Redis delete failed still takes hold.
          await activeSessions.remove([outcome.sessionId]);
          throw new AppError(401, 'REFRESH_TOKEN_INVALID', ['Refresh token is invalid, expired or revoked']);
        case 'reused':
          log.warn(
            { sessionId: outcome.sessionId, userId: outcome.userId, ip: client.ipAddress },
            'refresh token reuse detected: session ended',
          );
          await activeSessions.remove([outcome.sessionId]);
          await record({
            type: 'refresh_reuse',
            userId: outcome.userId,
            sessionId: outcome.sessionId,
            client,
            details: { rotatedAt: outcome.rotatedAt.toISOString() },
            at: now,
          });
          throw new AppError(401, 'REFRESH_TOKEN_REUSED', [
            'Refresh token was already used; the session has ended',
          ]);
        case 'rotated':
        case 'again':
          return outcome.pair;
      }
    },

    /** Ends the session a refresh token belongs to, on behalf of its owner. */
    async revoke(
      userId: string,
      presented: string,
      client: ClientInfo,
    ): Promise<{ _id: string; revokedAt: string }> {
      const now = clock.now();
      const token = await repository.findRefreshToken(db, hashRefreshToken(presented));
      if (!token) throw new AppError(404, 'REFRESH_TOKEN_NOT_FOUND', ['Unknown refresh token']);
      if (token.userId !== userId) {
        throw new AppError(403, 'REFRESH_TOKEN_FOREIGN', ['The refresh token belongs to another user']);
      }
      const usable = !token.sessionEndedAt && !token.rotatedAt && token.expiresAt > now;
      const ended = usable && (await repository.endSession(db, token.sessionId, now, 'revoked'));
      // Also when it had ended before: a retry after a failed Redis delete must still revoke.
      if (ended || token.sessionEndedAt) await activeSessions.remove([token.sessionId]);
      if (ended) {
        sessionsEnded.add(1, { reason: 'revoked' });
        const event = { userId, sessionId: token.sessionId, client, at: now };
        await record({ type: 'revoke', ...event, details: { via: 'refresh_token' } });
      } else {
        throw new AppError(409, 'REFRESH_TOKEN_NOT_ACTIVE', [
          'The refresh token is already revoked, rotated or expired',
        ]);
      }
      return { _id: token.sessionId, revokedAt: now.toISOString() };
    },

    /** Ends every session of the user. */
    async logout(userId: string, client: ClientInfo): Promise<{ revokedSessions: number }> {
      const now = clock.now();
      const ended = await repository.endUserSessions(db, userId, now, 'logout');
      // Every unexpired session's key, not only those ended now: a retry repairs a failed delete.
      await activeSessions.remove(await repository.unexpiredSessionIds(db, userId, now));
      sessionsEnded.add(ended.length, { reason: 'logout' });
      await record({ type: 'logout', userId, client, details: { revokedSessions: ended.length }, at: now });
      return { revokedSessions: ended.length };
    },

    /** Ends one of the user's sessions by id ("sign out that device"). */
    async end(
      userId: string,
      sessionId: string,
      client: ClientInfo,
    ): Promise<{ _id: string; revokedAt: string }> {
      const now = clock.now();
      const session = UUID.test(sessionId)
        ? await repository.findUserSession(db, userId, sessionId)
        : undefined;
      if (!session) throw new AppError(404, 'SESSION_NOT_FOUND', ['Unknown session']);
      const open = !session.endedAt && session.expiresAt > now;
      const ended = open && (await repository.endSession(db, sessionId, now, 'signed_out'));
      await activeSessions.remove([sessionId]);
      if (!ended) throw new AppError(409, 'SESSION_ENDED', ['The session has already ended']);
      sessionsEnded.add(1, { reason: 'signed_out' });
      await record({ type: 'revoke', userId, sessionId, client, details: { via: 'session_id' }, at: now });
      return { _id: sessionId, revokedAt: now.toISOString() };
    },

    /** The user's active sessions, newest first, with the caller's own marked `current`. */
    async list(userId: string, currentSessionId: string, query: PaginationQuery) {
      const now = clock.now();
      const [totalItems, rows] = await Promise.all([
        repository.countActiveSessions(db, userId, now),
        repository.listActiveSessions(db, userId, now, { limit: query.limit, offset: pageOffset(query) }),
      ]);
      return {
        list: rows.map((s) => ({
          _id: s.id,
          createdAt: s.createdAt.toISOString(),
          lastUsedAt: s.lastUsedAt.toISOString(),
          expiresAt: s.expiresAt.toISOString(),
          ipAddress: s.ipAddress,
          userAgent: s.userAgent,
          current: s.id === currentSessionId,
        })),
        pagination: paginationMeta(query, totalItems),
      };
    },
  };
}
