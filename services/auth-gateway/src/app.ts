import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { traceFields } from '@tessera/telemetry';
import Fastify, { type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { DestinationStream } from 'pino';
import { type Clock, systemClock } from './clock.ts';
import type { GatewayConfig } from './config.ts';
import healthRoutes from './modules/health/routes.ts';
import sessionsRoutes from './modules/sessions/routes.ts';
import { createSessionsService } from './modules/sessions/sessions.service.ts';
import signInRoutes from './modules/sign-in/routes.ts';
import jwksRoutes from './modules/tokens/routes.ts';
import auth from './plugins/auth.ts';
import configPlugin from './plugins/config.ts';
import db from './plugins/db.ts';
import errorHandler, { clientErrorHandler, frameworkErrors } from './plugins/error-handler.ts';
import httpSecurity from './plugins/http-security.ts';
import jsonBody from './plugins/json-body.ts';
import mailQueue from './plugins/mail-queue.ts';
import metrics from './plugins/metrics.ts';
import rateLimit from './plugins/rate-limit.ts';
import redis from './plugins/redis.ts';
import { validatorCompiler } from './plugins/validation.ts';

export interface AppOptions {
  clock?: Clock;
  /** Where log lines go instead of stdout (tests read them). */
  logStream?: DestinationStream;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** The whole gateway: infrastructure first, then the modules, in the order they depend on each other. */
export async function buildApp(config: GatewayConfig, { clock = systemClock, logStream }: AppOptions = {}) {
  const app = Fastify({
    logger: loggerOptions(config, logStream),
    trustProxy: config.TRUST_PROXY,
    bodyLimit: 16 * 1024,
    frameworkErrors,
    clientErrorHandler,
    // Node would answer an HTTP/1.1 request without Host with a bare 400; http-security envelopes it.
    http: { requireHostHeader: false },
    // Honour a well-formed X-Request-Id from the caller, otherwise mint one.
    requestIdHeader: false,
    genReqId: (request: IncomingMessage) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  // Infrastructure
  await app.register(configPlugin, { config, clock });
  await app.register(errorHandler);
  await app.register(httpSecurity);
  await app.register(metrics);
  await app.register(jsonBody);
  await app.register(db);
  await app.register(redis);
  await app.register(rateLimit);
  await app.register(mailQueue);
  await app.register(auth);

  // Modules
  const sessions = createSessionsService({
    db: app.db,
    activeSessions: app.activeSessions,
    tokens: app.tokens,
    clock,
    log: app.log,
    accessTokenTtl: config.ACCESS_TOKEN_TTL,
    refreshTokenTtl: config.REFRESH_TOKEN_TTL,
    refreshReuseGrace: config.REFRESH_REUSE_GRACE,
  });
  await app.register(healthRoutes);
  await app.register(jwksRoutes);
  await app.register(signInRoutes, { prefix: '/api/v1/auth', sessions });
  await app.register(sessionsRoutes, { prefix: '/api/v1/auth', sessions });

  return app;
}

function loggerOptions(config: GatewayConfig, stream?: DestinationStream): FastifyServerOptions['logger'] {
  return {
    level: config.LOG_LEVEL,
    // trace_id and span_id of the active span on every line written inside a request or job.
    mixin: traceFields,
    // Request bodies are never logged, nor headers that carry credentials, nor the Redis command of
    // a failed call (ioredis attaches it to the error, and a queued job's data holds a code).
    redact: ['req.headers.authorization', 'req.headers.cookie', 'err.command'],
    // The path, not the query string: that is the client's to fill, with whatever it likes.
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: request.url.split('?')[0],
        remoteAddress: request.ip,
      }),
    },
    ...(stream
      ? { stream }
      : config.APP_ENV === 'development'
        ? { transport: { target: 'pino-pretty' } }
        : {}),
  };
}
