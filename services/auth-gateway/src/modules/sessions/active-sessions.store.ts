import type { RedisClient } from '@tessera/redis';

export type ActiveSessionStore = ReturnType<typeof createActiveSessionStore>;

// 25,000 keys deleted at once held other commands on the connection up to 0.2–0.5 s; 256 at a time,
// 5–50 ms, and the whole took no longer (README, Security).
const REMOVE_AT_ONCE = 256;
// Sessions ended while Redis failed their key's delete, remembered to delete it once Redis answers
// again; beyond this many (a long outage), the rest wait for their clients' own retries.
const PENDING_AT_MOST = 100_000;

/**
 * What gateways before 2026-11-28 wrote as every key's value: authentication asks Postgres whose
 * session it is, once, and writes the user (authenticate.ts), so that an upgrade refuses no access
 * token. A release after the next drops it (CHANGELOG.md).
 */
export const WRITTEN_BEFORE_USERS = '1';

/**
 * The sessions whose access tokens are honoured, as Redis keys that live until the session expires
 * and hold the id of the session's user, so that a token naming one user and another's session is
 * refused. Authenticating a request costs one GET; ending a session deletes its key, so the next
 * request with its access token is refused. Losing Redis fails closed: clients refresh and are let
 * back in. A delete that Redis failed (its caller answered 503) is made again once Redis is ready.
 */
export function createActiveSessionStore(redis: RedisClient) {
  const key = (sessionId: string) => `session:${sessionId}`;
  const pending = new Set<string>();
  const remember = (sessionIds: string[]) => {
    for (const sessionId of sessionIds) if (pending.size < PENDING_AT_MOST) pending.add(sessionId);
  };
  // One DEL per key: on a Redis Cluster the keys of one DEL must share a slot. A few hundred at a
  // time, so that the other requests' commands take turns with a user's thousands of sessions
  // (a logout, an account's deletion) instead of queueing behind all of them. Answers how many
  // keys there were; what Redis failed is remembered.
  async function remove(sessionIds: string[]): Promise<number> {
    let removed = 0;
    for (let at = 0; at < sessionIds.length; at += REMOVE_AT_ONCE) {
      const batch = sessionIds.slice(at, at + REMOVE_AT_ONCE);
      try {
        const deleted = await Promise.all(batch.map((sessionId) => redis.del(key(sessionId))));
        removed += deleted.reduce((sum, each) => sum + each, 0);
      } catch (error) {
        remember(sessionIds.slice(at));
        throw error;
      }
    }
    return removed;
  }
  redis.on('ready', () => {
    const again = [...pending];
    pending.clear();
    if (again.length > 0) remove(again).catch(() => {});
  });
  return {
    /**
     * Marks a session about to be recorded, before its user is known (a sign-in learns the user's
     * id from the statement that records the session), or about to be looked at (a refresh that
     * found no key): no access token passes it until `assign`.
     */
    async reserve(sessionId: string, expiresAt: Date, now: Date): Promise<void> {
      const ttl = expiresAt.getTime() - now.getTime();
      if (ttl > 0) await redis.set(key(sessionId), '', 'PX', ttl);
    },
    /**
     * Gives an existing key its session's user and expiry; false when the key is gone (the session
     * ended, or Redis lost it).
     */
    async assign(sessionId: string, userId: string, expiresAt: Date, now: Date): Promise<boolean> {
      const ttl = expiresAt.getTime() - now.getTime();
      return ttl > 0 && (await redis.set(key(sessionId), userId, 'PX', ttl, 'XX')) === 'OK';
    },
    /** What the session's key holds: its user's id (`''` while a sign-in records it), or null: ended. */
    holder(sessionId: string): Promise<string | null> {
      return redis.get(key(sessionId));
    },
    remove,
  };
}
