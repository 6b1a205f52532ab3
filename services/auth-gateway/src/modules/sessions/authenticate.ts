import { GatewayError } from '../../errors.ts';
import type { AccessClaims, TokenService } from '../tokens/tokens.service.ts';
import type { ActiveSessionStore } from './active-sessions.store.ts';

/**
 * Who an access token speaks for: its signature and claims, and its session still active and its
 * user's (one Redis round trip, no Postgres query), so a revocation holds from the next request on.
 */
export function verifyCaller(tokens: TokenService, activeSessions: ActiveSessionStore) {
  return async (accessToken: string): Promise<AccessClaims> => {
    const claims = await tokens.verifyAccessToken(accessToken);
    if (!(await activeSessions.isActive(claims.sid, claims.sub))) throw new GatewayError('SESSION_ENDED');
    return claims;
  };
}
