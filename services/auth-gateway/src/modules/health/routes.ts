import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorResponses } from '@tessera/contracts';
import { checkReadiness, type ReadinessChecks } from '@tessera/telemetry';
import { Type } from 'typebox';
import { GatewayError } from '../../errors.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** What `/health/ready` checks, also for the operations port's probes. */
    readiness: ReadinessChecks;
  }
}

const CHECK_TIMEOUT_MS = 1000;

/** Liveness and readiness for load balancers and orchestrators; never rate-limited. */
const healthRoutes: FastifyPluginAsyncTypebox<{ checks: ReadinessChecks }> = async (app, { checks }) => {
  const config = { rateLimit: false } as const;
  const tags = ['operations'];

  app.get(
    '/health/live',
    {
      config,
      schema: {
        operationId: 'getLiveness',
        summary: 'Liveness probe: the process is running',
        tags,
        security: [],
        response: {
          200: Type.Object(
            { status: Type.Literal('ok') },
            { description: 'The process is running', examples: [{ status: 'ok' }] },
          ),
        },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    {
      config,
      schema: {
        operationId: 'getReadiness',
        summary: 'Readiness probe: Postgres, migrated, and Redis answer',
        tags,
        security: [],
        response: {
          200: Type.Object(
            { postgres: Type.Literal('up'), redis: Type.Literal('up') },
            {
              description: 'Ready: Postgres, with every migration of this gateway applied, and Redis answer',
              examples: [{ postgres: 'up', redis: 'up' }],
            },
          ),
          ...errorResponses([
            503,
            'Postgres or Redis does not answer, or Postgres lacks a migration of this gateway (the ' +
              'details say which, e.g. "redis is down", "postgres schema is behind: run pnpm db:migrate"), ' +
              'or this instance is shutting down; try again after Retry-After seconds',
          ]),
        },
      },
    },
    async () => {
      const down = await checkReadiness(checks, CHECK_TIMEOUT_MS);
      if (down.length > 0) throw new GatewayError('NOT_READY', down);
      return { postgres: 'up', redis: 'up' } as const;
    },
  );
};

export default healthRoutes;
