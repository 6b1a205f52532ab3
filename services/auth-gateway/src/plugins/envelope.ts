import { errorResponses, SuccessEnvelope, success } from '@tessera/contracts';
import fp from 'fastify-plugin';
import type { TSchema } from 'typebox';
import type { Clock } from '../clock.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false` for the few routes that answer a standard format of their own (the JWK Set). */
    envelope?: boolean;
  }
}

/**
 * The envelope, put once around every route's success: a handler returns its `data` and its schema
 * declares the `data` of each 2xx status; both are wrapped here, at run time and in the schema that
 * serializes and documents the route. The errors any route can answer (a malformed request or
 * body, a body too large or not JSON, the general rate limit, a bug) are added to every schema too.
 * Errors are enveloped by the error handler.
 */
/** The data's schema in the envelope, and its examples as whole answers. */
function enveloped(data: TSchema, statusCode: number): TSchema {
  const schema = SuccessEnvelope(data);
  const examples = (data as { examples?: unknown[] }).examples;
  if (!examples) return schema;
  return {
    ...schema,
    examples: examples.map((example) => success(example, EXAMPLE_TIME, statusCode)),
  };
}
const EXAMPLE_TIME = new Date('2026-11-23T10:00:00.000Z');

export default fp<{ clock: Clock }>(
  async function envelope(app, { clock }) {
    app.addHook('onRoute', (route) => {
      const response = route.schema?.response as Record<string, TSchema> | undefined;
      if (!response) return;
      const wrapped = Object.entries(response).map(([status, schema]) => [
        status,
        status.startsWith('2') && route.config?.envelope !== false
          ? enveloped(schema, Number(status))
          : schema,
      ]);
      // Any route may meet these: a request too slow (408) or with too large headers (431), a
      // gateway that drains (503). Health probes are never rate-limited (rate-limit.ts): no 429.
      const common =
        route.config?.rateLimit === false
          ? errorResponses(400, 408, 413, 415, 431, 500, 503)
          : errorResponses(400, 408, 413, 415, 429, 431, 500, 503);
      // A new schema object: the module's own is shared by every app built in the process.
      route.schema = { ...route.schema, response: { ...common, ...Object.fromEntries(wrapped) } };
    });

    app.addHook('preSerialization', (request, reply, payload, done) => {
      if (reply.statusCode >= 400 || request.routeOptions.config.envelope === false)
        return done(null, payload);
      done(null, success(payload, clock.now(), reply.statusCode));
    });
  },
  { name: 'envelope' },
);
