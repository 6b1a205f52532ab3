import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AppError, errorResponses, SuccessEnvelope, success } from '@tessera/contracts';
import { sql } from 'kysely';
import { Type } from 'typebox';

const CHECK_TIMEOUT_MS = 1000;

const within = <T>(promise: Promise<T>) =>
  Promise.race([
    promise,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS).unref(),
    ),
  ]);

/** Liveness and readiness for load balancers and orchestrators. */
const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/health/live',
    { schema: { response: { 200: SuccessEnvelope(Type.Object({ status: Type.Literal('ok') })) } } },
    async () => success({ status: 'ok' as const }, app.clock.now()),
  );

  app.get(
    '/health/ready',
    {
      schema: {
        response: {
          200: SuccessEnvelope(Type.Object({ postgres: Type.Literal('up'), redis: Type.Literal('up') })),
          ...errorResponses(503),
        },
      },
    },
    async () => {
      const [postgres, redis] = await Promise.allSettled([
        within(sql`select 1`.execute(app.db)),
        within(app.redis.ping()),
      ]);
      const down = [
        postgres.status === 'rejected' && 'postgres is down',
        redis.status === 'rejected' && 'redis is down',
      ];
      const details = down.filter((d): d is string => Boolean(d));
      if (details.length > 0) throw new AppError(503, 'NOT_READY', details);
      return success({ postgres: 'up' as const, redis: 'up' as const }, app.clock.now());
    },
  );
};

export default healthRoutes;
