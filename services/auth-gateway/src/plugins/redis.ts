import fp from 'fastify-plugin';
import { Redis } from 'ioredis';

declare module 'fastify' {
  interface FastifyInstance {
    redis: Redis;
  }
}

/**
 * Redis for codes and active sessions. Commands fail fast while Redis is unreachable (no offline
 * queue), which the error handler answers with 503 instead of letting requests hang.
 */
export default fp(
  async function redisPlugin(app) {
    const redis = new Redis(app.config.REDIS_URL, {
      keyPrefix: app.config.REDIS_KEY_PREFIX,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 3000,
    });
    redis.on('error', (err) => app.log.warn({ err }, 'Redis connection error'));
    app.decorate('redis', redis);
    app.addHook('onClose', async () => {
      if (redis.status === 'ready') await redis.quit();
      else redis.disconnect();
    });
    await redis.connect();
  },
  { name: 'redis', dependencies: ['config'] },
);
