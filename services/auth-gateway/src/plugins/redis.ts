import { DependencyUnavailableError } from '@tessera/contracts';
import {
  closeRedis,
  createRedis,
  type RedisClient,
  type RedisTarget,
  refuseClusterNode,
  reportOutages,
  warnIfClockDiffers,
  warnIfNotDurable,
} from '@tessera/redis';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    redis: RedisClient;
  }
}

/**
 * Redis (one server, or a Redis Cluster when REDIS_CLUSTER_NODES names it) for codes, limits and
 * active sessions. Commands fail fast while Redis is unreachable (no offline queue) with
 * DependencyUnavailableError, which the error handler answers with 503.
 */
export default fp<RedisTarget & { keyPrefix: string; now: () => number }>(
  async function redisPlugin(app, { keyPrefix, now, ...target }) {
    let lastError: Error | undefined;
    const redis = createRedis(
      target,
      'commands',
      (err) => {
        lastError = err;
      },
      { keyPrefix },
    );
    reportOutages(redis, app.log, 'Redis');
    app.decorate<RedisClient>('redis', redis);
    app.addHook('onClose', () => closeRedis(redis));
    // Why it could not connect (ECONNREFUSED, WRONGPASS…), rather than ioredis's "Connection is closed".
    await redis.connect().catch((error: Error) => {
      throw new DependencyUnavailableError('redis', { cause: lastError ?? error });
    });
    await refuseClusterNode(redis);
    await warnIfNotDurable(redis, app.log);
    await warnIfClockDiffers(redis, app.log, now);
  },
  { name: 'redis' },
);
