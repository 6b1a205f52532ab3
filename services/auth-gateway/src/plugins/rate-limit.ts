import rateLimit from '@fastify/rate-limit';
import { AppError } from '@tessera/contracts';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { clientInfo, recordSecurityEventSafely } from '../modules/security-events/security-events.ts';

/**
 * The general limit: RATE_LIMIT_MAX requests per client IP (IPv6 per /64) per RATE_LIMIT_WINDOW on
 * every route, counted in Redis so it holds across gateway processes. The
 * sign-in limits of API.md §7 are stricter and live with the codes (modules/sign-in).
 */
export default fp(
  async function rateLimitPlugin(app) {
    const { config, clock } = app;
    const windowMs = config.RATE_LIMIT_WINDOW * 1000;

    // Logged and recorded once per client and window, not once per refused request.
    async function noteExceeded(request: FastifyRequest, key: string) {
      const first = await app.redis
        .set(`rate-limit-noted:${key}`, '1', 'PX', windowMs, 'NX')
        .catch(() => null);
      if (!first) return;
      request.log.warn({ ip: request.ip }, 'general rate limit exceeded');
      await recordSecurityEventSafely(app.db, request.log, {
        type: 'rate_limit',
        client: clientInfo(request),
        details: { limit: 'requests:ip' },
        at: clock.now(),
      });
    }

    await app.register(rateLimit, {
      // As an app-wide onRequest hook below, so unknown routes count too.
      global: false,
      redis: app.redis,
      nameSpace: 'rate-limit:',
      max: config.RATE_LIMIT_MAX,
      timeWindow: windowMs,
      // Without Redis the routes that need it answer 503 anyway; health and JWKS keep working.
      skipOnError: true,
      onExceeded: (request, key) => void noteExceeded(request, key),
      errorResponseBuilder: (_request, { ttl }) => {
        const retryAfter = Math.ceil(ttl / 1000);
        return new AppError(429, 'RATE_LIMITED', [`Try again in ${retryAfter} seconds`], retryAfter);
      },
    });
    app.addHook('onRequest', app.rateLimit());
  },
  { name: 'rate-limit', dependencies: ['config', 'db', 'redis', 'error-handler'] },
);
