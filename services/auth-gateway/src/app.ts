import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import type { DestinationStream } from 'pino';
import manifest from '../package.json' with { type: 'json' };
import { type Clock, systemClock } from './clock.ts';
import type { GatewayConfig } from './config.ts';
import { loggerOptions, RequestLog } from './logging.ts';
import accountDeletionRoutes from './modules/account-deletion/routes.ts';
import healthRoutes from './modules/health/routes.ts';
import securityEventsRoutes from './modules/security-events/routes.ts';
import { clientInfo } from './modules/security-events/security-events.ts';
import sessionsRoutes from './modules/sessions/routes.ts';
import signInRoutes from './modules/sign-in/routes.ts';
import { loadTokenKeys } from './modules/tokens/load-keys.ts';
import jwksRoutes from './modules/tokens/routes.ts';
import usersRoutes from './modules/users/routes.ts';
import auth from './plugins/auth.ts';
import clientAddress from './plugins/client-address.ts';
import connections from './plugins/connections.ts';
import accountConsole from './plugins/console.ts';
import db from './plugins/db.ts';
import docs from './plugins/docs.ts';
import draining from './plugins/draining.ts';
import envelope from './plugins/envelope.ts';
import errorHandler, { clientErrorHandler, frameworkErrors } from './plugins/error-handler.ts';
import httpSecurity from './plugins/http-security.ts';
import jsonBody from './plugins/json-body.ts';
import mailQueue from './plugins/mail-queue.ts';
import metrics from './plugins/metrics.ts';
import rateLimit from './plugins/rate-limit.ts';
import redis from './plugins/redis.ts';
import responseCheck from './plugins/response-check.ts';
import { validatorCompiler } from './plugins/validation.ts';
import { createServices } from './services.ts';

export interface AppOptions {
  clock?: Clock;
  /** Where log lines go instead of stdout (tests read them). */
  logStream?: DestinationStream;
  /** Tests: check every response against the schema its route documents. */
  checkResponses?: boolean;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

// A request's headers, at most (more is a 431): what the gateway holds of each connection while they
// arrive must fit MAX_CONNECTIONS times in the heap (Node's own 16 KB and ~2,000 lines took ~23 KB and
// ~100 KB of it per connection: a few thousand clients that never end their headers ended the
// process). An API request's are a few hundred bytes, a bearer token the largest.
const MAX_HEADER_BYTES = 8 * 1024;
const MAX_HEADER_LINES = 100;

/**
 * The gateway as an HTTP pipeline, in the order a request meets it: how requests are read and
 * answered, the clients, the services (built once, in services.ts), then the routes of each module.
 */
export async function buildApp(
  config: GatewayConfig,
  { clock = systemClock, logStream, checkResponses = false }: AppOptions = {},
) {
  const errors = { appEnv: config.env, clock };
  const app = Fastify({
    logger: loggerOptions(config, logStream),
    logController: new RequestLog(),
    trustProxy: config.http.trustProxy,
    bodyLimit: 16 * 1024,
    frameworkErrors: frameworkErrors(errors),
    clientErrorHandler,
    // Requests arriving while the gateway drains get the envelope (plugins/draining), not a bare 503.
    return503OnClosing: false,
    // A request not received whole within REQUEST_TIMEOUT, its headers included, is a 408 (checked
    // every second, not Node's 30 s), so that clients sending nothing more cannot pile up connections.
    requestTimeout: config.http.requestTimeout * 1000,
    // An idle connection's life: longer than a proxy in front keeps its own (KEEP_ALIVE_TIMEOUT).
    keepAliveTimeout: config.http.keepAliveTimeout * 1000,
    http: {
      // Node would answer an HTTP/1.1 request without Host with a bare 400; http-security envelopes it.
      requireHostHeader: false,
      headersTimeout: config.http.requestTimeout * 1000,
      connectionsCheckingInterval: 1000,
      maxHeaderSize: MAX_HEADER_BYTES,
    },
    // Honour a well-formed X-Request-Id from the caller, otherwise mint one.
    requestIdHeader: false,
    genReqId: (request: IncomingMessage) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.server.maxHeadersCount = MAX_HEADER_LINES;
  app.setValidatorCompiler(validatorCompiler);
  app.addHook('onSend', (request, reply, _payload, done) => {
    reply.header('x-request-id', request.id);
    done();
  });

  // Reading and answering requests
  await app.register(connections, {
    max: config.http.maxConnections,
    databasePool: config.database.poolSize,
  });
  await app.register(clientAddress, { behindProxy: config.http.trustProxy !== false });
  await app.register(errorHandler, errors);
  // Security headers first: the 503 of a drain carries them too.
  await app.register(httpSecurity, { appEnv: config.env, corsOrigins: config.http.corsOrigins });
  await app.register(draining, { requestTimeout: config.http.requestTimeout * 1000 });
  await app.register(metrics);
  await app.register(envelope, { clock });
  if (checkResponses) await app.register(responseCheck);
  await app.register(jsonBody);
  await app.register(docs, { serve: config.docs.enabled, version: manifest.version });
  await app.register(accountConsole, { serve: config.console.enabled, dir: config.console.dir });

  // Clients
  await app.register(db, config.database);
  await app.register(redis, { ...config.redis, now: () => clock.now().getTime() });
  await app.register(mailQueue, { redis: config.redis, prefix: config.mail.queuePrefix });

  const services = createServices(config, {
    db: app.db,
    schema: app.schemaState,
    postgresAnswers: app.postgresAnswers,
    redis: app.redis,
    mailQueue: app.mailQueue,
    queueRedis: app.mailQueueRedis,
    keys: await loadTokenKeys(config.jwt),
    clock,
    log: app.log,
  });

  // Who may call, how often
  await app.register(rateLimit, {
    redis: app.redis,
    max: config.rateLimit.max,
    windowSeconds: config.rateLimit.window,
    onLimitReached: async (request) => {
      await services.securityLog.recordAfter({
        type: 'rate_limited',
        client: clientInfo(request),
        details: { limit: 'requests:ip' },
        at: clock.now(),
      });
    },
  });
  await app.register(auth, { verify: services.authenticate });

  // Modules
  await app.register(healthRoutes, { checks: services.readiness });
  // The same checks for the operations port's probes (server.ts).
  app.decorate('readiness', services.readiness);
  await app.register(jwksRoutes, { jwks: services.jwks });
  await app.register(signInRoutes, { prefix: '/api/v1/auth', signIn: services.signIn });
  await app.register(sessionsRoutes, { prefix: '/api/v1/auth', sessions: services.sessions });
  await app.register(usersRoutes, { prefix: '/api/v1/users', users: services.users });
  await app.register(securityEventsRoutes, { prefix: '/api/v1/users', securityLog: services.securityLog });
  await app.register(accountDeletionRoutes, {
    prefix: '/api/v1/users',
    accountDeletion: services.accountDeletion,
  });

  // Background work runs while the app is up. These onClose hooks, added after the clients', run
  // before theirs, so a batch in progress finishes on open connections.
  app.addHook('onReady', async () => {
    for (const sweep of services.sweeps) sweep.start();
  });
  app.addHook('onClose', async () => {
    await Promise.all(services.sweeps.map((sweep) => sweep.stop()));
  });

  return app;
}
