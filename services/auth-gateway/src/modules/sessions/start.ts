import type { Transaction } from 'kysely';
import type { Database } from '../../database.ts';
import type { ClientInfo } from '../security-events/security-events.ts';
import { generateRefreshToken, hashRefreshToken } from '../tokens/refresh-token.ts';
import type { TokenPair } from '../tokens/schemas.ts';
import { type SessionsContext, seconds, tokenPair } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

/**
 * One sign-in, one session, recorded with the client's IP and user agent. The user comes from
 * `userIn`, run in the same transaction: an account finalized meanwhile cannot get a session.
 */
export function startSession(context: SessionsContext) {
  const { db, clock, activeSessions, securityLog } = context;
  return async <User extends { id: string; roles: string[] }>(
    client: ClientInfo,
    userIn: (trx: Transaction<Database>) => Promise<User>,
  ): Promise<{ user: User; tokens: TokenPair }> => {
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + seconds(context.refreshTokenTtl));
    const refreshToken = generateRefreshToken();
    const { user, sessionId } = await db.transaction().execute(async (trx) => {
      const user = await userIn(trx);
      const id = await repository.insertSession(trx, { userId: user.id, ...client, now, expiresAt });
      await repository.insertRefreshToken(trx, {
        tokenHash: hashRefreshToken(refreshToken),
        sessionId: id,
        issuedAt: now,
        expiresAt,
      });
      await securityLog.record({ type: 'sign_in', userId: user.id, sessionId: id, client, at: now }, trx);
      await activeSessions.markActive(id, expiresAt, now);
      return { user, sessionId: id };
    });
    const tokens = tokenPair(context, { sub: user.id, sid: sessionId, roles: user.roles }, refreshToken, now);
    return { user, tokens };
  };
}
