import { closeRedis, createRedis, durabilityProblems } from '@tessera/redis';
import fp from 'fastify-plugin';
import type { Redis } from 'ioredis';

declare module 'fastify' {
  interface FastifyInstance {
    redis: Redis;
  }
}

/**
 * Redis for codes, limits and active sessions. Commands fail fast while Redis is unreachable (no
 * offline queue) with DependencyUnavailableError, which the error handler answers with 503.
 */
export default fp<{ url: string; keyPrefix: string }>(
  async function redisPlugin(app, { url, keyPrefix }) {
    const redis = createRedis(url, 'commands', (err) => app.log.warn({ err }, 'Redis connection error'), {
      keyPrefix,
    });
    app.decorate('redis', redis);
    app.addHook('onClose', () => closeRedis(redis));
    await redis.connect();
    const problems = await durabilityProblems(redis);
    if (problems.length > 0)
      app.log.warn(
        { problems },
        'Redis may lose queued emails on a restart or when full; see README, Operations',
      );
  },
  { name: 'redis' },
);
