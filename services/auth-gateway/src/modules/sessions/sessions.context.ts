import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import type { SecurityLog } from '../security-events/security-events.ts';
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
}

export const seconds = (n: number) => n * 1000;

/** The pair a client gets: a new access token for `claims` and the given refresh token. */
export function tokenPair(
  context: SessionsContext,
  claims: AccessClaims,
  refreshToken: string,
  issuedAt: Date,
): TokenPair {
  return {
    accessToken: context.tokens.signAccessToken(claims, issuedAt),
    refreshToken,
    expiresIn: context.accessTokenTtl,
    refreshExpiresIn: context.refreshTokenTtl,
  };
}
