import type { Redis } from 'ioredis';

export type ActiveSessionStore = ReturnType<typeof createActiveSessionStore>;

/**
 * The sessions whose access tokens are honoured, as Redis keys that live until the session expires.
 * Authenticating a request costs one EXISTS; ending a session deletes its key, so the next request
 * with its access token is refused. Losing Redis fails closed: clients refresh and are let back in.
 */
export function createActiveSessionStore(redis: Redis) {
  const key = (sessionId: string) => `session:${sessionId}`;
  return {
    async markActive(sessionId: string, expiresAt: Date, now: Date): Promise<void> {
      const ttl = expiresAt.getTime() - now.getTime();
      if (ttl > 0) await redis.set(key(sessionId), '1', 'PX', ttl);
    },
    async isActive(sessionId: string): Promise<boolean> {
      return (await redis.exists(key(sessionId))) === 1;
    },
    async remove(sessionIds: string[]): Promise<void> {
      if (sessionIds.length > 0) await redis.del(...sessionIds.map(key));
    },
  };
}
