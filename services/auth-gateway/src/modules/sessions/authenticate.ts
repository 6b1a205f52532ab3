import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import { GatewayError } from '../../errors.ts';
import type { AccessClaims, TokenService } from '../tokens/tokens.service.ts';
import { type ActiveSessionStore, WRITTEN_BEFORE_USERS } from './active-sessions.store.ts';
import { findUserSession } from './sessions.repository.ts';

/**
 * Who an access token speaks for: its signature and claims, and its session still active and its
 * user's (one Redis round trip, no Postgres query), so a revocation holds from the next request on.
 */
export function verifyCaller(
  tokens: TokenService,
  activeSessions: ActiveSessionStore,
  { db, clock }: { db: Kysely<Database>; clock: Clock },
) {
  /**
   * A key an earlier gateway wrote, which names no user: honoured when Postgres says the session is
   * the token's user's and open, and then given that user as Postgres spells it (unless a
   * revocation deleted it meanwhile). The key of such a session that has ended goes, so that it
   * costs no more queries; one of another user's session is left as it is.
   */
  async function adopted({ sub, sid }: AccessClaims): Promise<boolean> {
    const session = await findUserSession(db, sub, sid);
    if (!session) return false;
    const now = clock.now();
    if (session.endedAt || session.expiresAt <= now) {
      await activeSessions.remove([sid]);
      return false;
    }
    return activeSessions.assign(sid, session.userId, session.expiresAt, now);
  }

  return async (accessToken: string): Promise<AccessClaims> => {
    const claims = await tokens.verifyAccessToken(accessToken);
    const holder = await activeSessions.holder(claims.sid);
    if (holder === claims.sub) return claims;
    if (holder === WRITTEN_BEFORE_USERS && (await adopted(claims))) return claims;
    throw new GatewayError('SESSION_ENDED');
  };
}
