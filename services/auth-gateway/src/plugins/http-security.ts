import cors from '@fastify/cors';
import type { AppEnv } from '@tessera/config';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import helmet from 'helmet';
import { GatewayError } from '../errors.ts';

/** The one response a cache may keep: public keys, no secrets. Its route sets its own Cache-Control. */
const JWKS_PATH = '/.well-known/jwks.json';
const CORS_METHODS = ['GET', 'POST', 'DELETE', 'PATCH'];
const HSTS = { maxAge: 31_536_000, includeSubDomains: true };

/**
 * What helmet and the Cache-Control hook below set, as plain headers, for the one kind of response
 * that skips Fastify's hooks: `frameworkErrors` (a URL that cannot be decoded). A test keeps the two
 * in step.
 */
export function hooklessSecurityHeaders(appEnv: AppEnv): Record<string, string> {
  return {
    'content-security-policy': "default-src 'none';frame-ancestors 'none'",
    'cross-origin-resource-policy': 'same-origin',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    ...(appEnv === 'production'
      ? { 'strict-transport-security': `max-age=${HSTS.maxAge}; includeSubDomains` }
      : {}),
    'cache-control': 'no-store',
  };
}

/**
 * Security headers for a JSON API (helmet) and the CORS allow-list (`CORS_ORIGINS`). Registered
 * right after the error handler so that every later hook, handler and error response carries them.
 */
export default fp<{ appEnv: AppEnv; corsOrigins: readonly string[] }>(
  async function httpSecurity(app: FastifyInstance, { appEnv, corsOrigins }) {
    // Only what makes sense for JSON: no HTML is ever served, so nothing may be loaded, framed or
    // referred; COOP, Origin-Agent-Cluster, DNS prefetch and the like only matter for documents.
    // Built once: @fastify/helmet would build this middleware again for every request.
    const setSecurityHeaders = helmet({
      contentSecurityPolicy: {
        useDefaults: false,
        directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
      },
      // CORP only restricts no-cors loads (<script>, <img>); CORS fetches from allowed origins pass.
      crossOriginResourcePolicy: { policy: 'same-origin' },
      crossOriginOpenerPolicy: false,
      crossOriginEmbedderPolicy: false,
      originAgentCluster: false,
      referrerPolicy: { policy: 'no-referrer' },
      strictTransportSecurity: appEnv === 'production' ? HSTS : false,
      xContentTypeOptions: true,
      xDnsPrefetchControl: false,
      xDownloadOptions: false,
      xFrameOptions: { action: 'deny' },
      xPermittedCrossDomainPolicies: false,
      xXssProtection: false,
    });
    app.addHook('onRequest', (request, reply, done) =>
      setSecurityHeaders(request.raw, reply.raw, (error) => done(error as Error | undefined)),
    );

    // Responses carry tokens and one-time codes: nothing but the key set may be stored.
    app.addHook('onSend', (request, reply, _payload, done) => {
      if (request.routeOptions.url !== JWKS_PATH || reply.statusCode !== 200)
        reply.header('cache-control', 'no-store');
      done();
    });

    // A preflight is only answered for a route that exists with the requested method; any other
    // OPTIONS request (no Origin, unknown path) is the enveloped 404, not @fastify/cors's text 400.
    if (corsOrigins.length > 0) {
      app.addHook('onRequest', async (request) => {
        if (request.method === 'OPTIONS' && !isPreflightForKnownRoute(app, request)) {
          throw new GatewayError('ROUTE_NOT_FOUND', [`No route OPTIONS ${request.url.split('?')[0]}`]);
        }
      });
    }

    await app.register(cors, {
      // No origins configured: CORS off, no headers at all; OPTIONS is an ordinary request (405).
      origin: corsOrigins.length > 0 ? [...corsOrigins] : false,
      methods: CORS_METHODS,
      allowedHeaders: ['Authorization', 'Content-Type', 'X-Request-Id'],
      exposedHeaders: ['Retry-After', 'X-Request-Id', 'Tessera-Error-Code'],
      // Bearer tokens only, never cookies.
      credentials: false,
      maxAge: 600,
    });

    // Node answers `Expect: <anything but 100-continue>` with a bare 417; RFC 9110 §10.1.1 lets a
    // server ignore an expectation it does not understand, so such a request is handled as usual.
    app.server.on('checkExpectation', app.routing);

    // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (Node's own check is turned off in
    // app.ts because it answers with an empty body), and so is one with two (Node keeps the first,
    // a proxy in front may have read the other).
    app.addHook('onRequest', (request, _reply, done) => {
      if (request.raw.httpVersion === '1.1' && request.headers.host === undefined)
        return done(new GatewayError('HOST_MISSING'));
      if (hostHeaders(request.raw.rawHeaders) > 1)
        return done(new GatewayError('BAD_REQUEST', ['Send one Host header']));
      done();
    });
  },
  { name: 'http-security', dependencies: ['error-handler'] },
);

/** How many Host headers a request has (Node's `headers` keeps the first), counted without allocating. */
function hostHeaders(raw: string[]): number {
  let count = 0;
  for (let index = 0; index < raw.length; index += 2)
    if (raw[index]?.length === 4 && raw[index]?.toLowerCase() === 'host') count += 1;
  return count;
}

function isPreflightForKnownRoute(app: FastifyInstance, request: FastifyRequest): boolean {
  const method = request.headers['access-control-request-method'];
  if (!request.headers.origin || typeof method !== 'string' || !CORS_METHODS.includes(method)) return false;
  return app.findRoute({ method, url: request.url }) !== null;
}
