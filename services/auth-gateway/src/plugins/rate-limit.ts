import rateLimit, { normalizeIP } from '@fastify/rate-limit';
import type { RedisClient } from '@tessera/redis';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Requests of the route not counted by the general limit when this says so (the console's files). */
    exemptFromRateLimit?: (request: FastifyRequest) => boolean;
  }
}

export interface RateLimitOptions {
  redis: RedisClient;
  max: number;
  windowSeconds: number;
  /** Called once per client and window when the client first goes over the limit. */
  onLimitReached: (request: FastifyRequest) => Promise<void>;
}

// Where @fastify/rate-limit's Redis store counts a client: this, then the key of its IP.
const NAME_SPACE = 'rate-limit:';

/**
 * The general limit: `max` requests per client IP (IPv6 per /64) per window on every route but the
 * health probes (route config `rateLimit: false`) and the console's files (`exemptFromRateLimit`),
 * counted in Redis so it holds across gateway
 * processes. The sign-in limits of API.md §7 are stricter and live with the codes (modules/sign-in).
 */
export default fp<RateLimitOptions>(
  async function rateLimitPlugin(app, { redis, max, windowSeconds, onLimitReached }) {
    const windowMs = windowSeconds * 1000;

    async function noteExceeded(request: FastifyRequest, key: string) {
      const first = await redis.set(`rate-limit-noted:${key}`, '1', 'PX', windowMs, 'NX').catch(() => null);
      if (!first) return;
      request.log.warn({ ip: request.ip }, 'general rate limit exceeded');
      await onLimitReached(request);
    }

    await app.register(rateLimit, {
      // As an app-wide onRequest hook below, so unknown routes count too.
      global: false,
      redis,
      nameSpace: NAME_SPACE,
      max,
      timeWindow: windowMs,
      allowList: (request) => {
        const { config } = request.routeOptions;
        return config.rateLimit === false || config.exemptFromRateLimit?.(request) === true;
      },
      // Without Redis the routes that need it answer 503 anyway; health and JWKS keep working.
      skipOnError: true,
      onExceeded: (request, key) => void noteExceeded(request, key),
      errorResponseBuilder: (_request, { ttl }) => {
        const retryAfter = Math.ceil(ttl / 1000);
        return new GatewayError('RATE_LIMITED', [`Try again in ${retryAfter} seconds`], retryAfter);
      },
    });
    // A client that reset its connection before this hook has no address left (Node forgets a
    // destroyed socket's): nothing to count it by, which the limit would log as an error, and nobody
    // to answer.
    app.addHook('onRequest', (request, reply, done) => {
      if (request.ip === undefined) reply.hijack();
      else done();
    });
    app.addHook('onRequest', app.rateLimit());
  },
  { name: 'rate-limit', dependencies: ['error-handler'] },
);

/**
 * A client IP's general limit as it stands, read without counting (`limits:show --ip`): the requests
 * counted in its window (those refused too), and the whole seconds it is refused for, if it is.
 */
export async function requestsStanding(redis: RedisClient, ip: string, max: number) {
  const key = `${NAME_SPACE}${normalizeIP(ip)}`;
  // Both in one transaction: a window ending between them would lend its count to the next one's time.
  const [count, ttl] = ((await redis.multi().get(key).pttl(key).exec()) ?? []).map(([, value]) => value);
  const held = Number(count ?? 0);
  return { held, limit: max, retryAfter: held >= max ? Math.ceil(Number(ttl) / 1000) : 0 };
}
