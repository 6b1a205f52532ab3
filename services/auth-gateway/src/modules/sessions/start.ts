import { randomUUID } from 'node:crypto';
import { DependencyUnavailableError } from '@tessera/contracts';
import type { ClientInfo } from '../security-events/security-events.ts';
import { generateRefreshToken, hashRefreshToken } from '../tokens/refresh-token.ts';
import type { TokenPair } from '../tokens/schemas.ts';
import type { UserRow } from '../users/user.ts';
import type { UpsertOnSignIn } from '../users/users.repository.ts';
import { type SessionsContext, seconds, tokenPair } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

/**
 * One sign-in, one session, recorded with the client's IP and user agent, in one statement with the
 * user's upsert (the users module's query, for `user`): an account finalized meanwhile cannot get a
 * session. Nothing is started, and `undefined` answered, when the account's deletion is due.
 */
export function startSession(context: SessionsContext) {
  const { db, clock, activeSessions, log } = context;
  return async (
    client: ClientInfo,
    user: UpsertOnSignIn,
  ): Promise<{ user: UserRow; tokens: TokenPair } | undefined> => {
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + seconds(context.refreshTokenTtl));
    const refreshToken = generateRefreshToken();
    const sessionId = randomUUID();
    // Before the session exists: whatever ends it later (a logout everywhere, the account's
    // deletion) deletes the key after this write, never before it. Its user is known after the
    // statement, and given to the key only if nothing has deleted it meanwhile.
    await activeSessions.reserve(sessionId, expiresAt, now);
    let row: UserRow | undefined;
    try {
      row = await repository.insertSignIn(db, user, {
        sessionId,
        tokenHash: hashRefreshToken(refreshToken),
        ...client,
        now,
        expiresAt,
      });
    } catch (error) {
      await activeSessions.remove([sessionId]).catch(() => undefined);
      throw error;
    }
    if (!row) {
      await activeSessions.remove([sessionId]).catch(() => undefined);
      return undefined;
    }
    await activeSessions.assign(sessionId, row.id, expiresAt, now).catch((error: unknown) => {
      // The session is recorded and the code spent: the pair goes out, and its access token is
      // refused until the client's refresh gives the key its user (refresh.ts), as after Redis lost it.
      if (!(error instanceof DependencyUnavailableError && error.dependency === 'redis')) throw error;
      log.warn({ sessionId }, "redis unavailable: signed in without the session's key");
      return false;
    });
    const tokens = tokenPair(context, { sub: row.id, sid: sessionId, roles: row.roles }, refreshToken, now);
    return { user: row, tokens };
  };
}
