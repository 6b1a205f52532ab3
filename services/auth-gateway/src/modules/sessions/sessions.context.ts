import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import type { SecurityLog } from '../security-events/security-events.ts';
import type { SuccessorSealer } from '../tokens/refresh-token.ts';
import type { TokenPair } from '../tokens/schemas.ts';
import type { AccessClaims, TokenService } from '../tokens/tokens.service.ts';
import type { ActiveSessionStore } from './active-sessions.store.ts';

/** What every session operation works with: one repository (the database), Redis keys, tokens. */
export interface SessionsContext {
  db: Kysely<Database>;
  activeSessions: ActiveSessionStore;
  tokens: TokenService;
  securityLog: SecurityLog;
  clock: Clock;
  log: FastifyBaseLogger;
  accessTokenTtl: number;
  refreshTokenTtl: number;
  refreshReuseGrace: number;
  /** Seals a rotated token's successor for the grace window. */
  successors: SuccessorSealer;
}

export const seconds = (n: number) => n * 1000;

/**
 * The pair a client gets: an access token for `claims` issued at `issuedAt`, and the given refresh
 * token, issued then too. Given again later (a retry inside the grace window), their lifetimes are
 * told from `now`: what is left of them.
 */
export function tokenPair(
  context: SessionsContext,
  claims: AccessClaims,
  refreshToken: string,
  issuedAt: Date,
  now = issuedAt,
): TokenPair {
  const age = Math.max(0, Math.ceil((now.getTime() - issuedAt.getTime()) / 1000));
  return {
    accessToken: context.tokens.signAccessToken(claims, issuedAt),
    refreshToken,
    expiresIn: context.accessTokenTtl - age,
    refreshExpiresIn: context.refreshTokenTtl - age,
  };
}
