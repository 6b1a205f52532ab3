import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifySchema } from 'fastify';
import fp from 'fastify-plugin';

const PREFIX = '/docs';

// Swagger UI's own files and the document, from this server only: no CDN, no validator badge, no
// inline script (its styles set style attributes, which is all 'unsafe-inline' allows here).
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export interface DocsOptions {
  /** `DOCS_ENABLED`: the OpenAPI document is built either way (the client types come from it). */
  serve: boolean;
  version: string;
}

type Schema = { description?: string; properties?: Record<string, Schema>; required?: string[] };

/**
 * A query parameter with a default may be left out (`page`, `limit`): the document says it is not
 * required, while the route's schema keeps it required so that handlers get the default filled in.
 */
function optionalDefaults(schema: FastifySchema): FastifySchema {
  const query = schema.querystring as Schema | undefined;
  if (!query?.required || !query.properties) return schema;
  const properties = query.properties;
  const required = query.required.filter((name) => !(properties[name] && 'default' in properties[name]));
  return { ...schema, querystring: { ...query, required } };
}

/**
 * A route describes each success where it declares it, on the `data` it answers; the envelope plugin
 * wraps that `data`, so here its description becomes the response's (which @fastify/swagger reads
 * from the response schema), instead of "Default Response".
 */
function successDescriptions(schema: FastifySchema): FastifySchema {
  const responses = schema.response as Record<string, Schema> | undefined;
  if (!responses) return schema;
  const described = Object.entries(responses).map(([status, response]) => {
    const data = response.properties?.data;
    if (!status.startsWith('2') || response.description || !data?.description) return [status, response];
    const { description, ...rest } = data;
    return [status, { ...response, description, properties: { ...response.properties, data: rest } }];
  });
  return { ...schema, response: Object.fromEntries(described) };
}

function transform({ schema, url }: { schema: FastifySchema; url: string }) {
  return { schema: schema && successDescriptions(optionalDefaults(schema)), url };
}

/**
 * The OpenAPI 3.1 document, built from the same schemas that validate and serialize the routes, at
 * `GET /docs/json`, and the Swagger UI console over it at `/docs`. Registered before any route.
 */
export default fp<DocsOptions>(
  async function docs(app, { serve, version }) {
    await app.register(swagger, {
      transform,
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Tessera',
          version,
          description:
            'Email one-time-code sign-in: a 4-digit code by email, a JWT access token and a rotating refresh ' +
            'token, sessions, the profile and the account. Every response is the envelope ' +
            '`{ isSuccess, statusCode, data, errors, timestamp }`; every list is `{ list, pagination }`.',
        },
        // Relative: the origin that serves this document (the default when `servers` is absent, said
        // outright for linters and generators), so it holds for every deployment; paths are absolute.
        servers: [{ url: '/', description: 'The gateway that serves this document' }],
        tags: [
          { name: 'auth', description: 'Sign-in by emailed code, tokens, sessions and sign-out' },
          {
            name: 'users',
            description: "The caller's profile, registration, account deletion and security events",
          },
          { name: 'operations', description: 'Health probes (also on the operations port)' },
        ],
        components: {
          securitySchemes: {
            // The console's Authorize field takes the access token alone, without "Bearer ".
            bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          },
        },
      },
    });
    if (!serve) return;

    // The console and the document are not enveloped, and the console may load its own assets.
    app.addHook('onRoute', (route) => {
      if (route.url === PREFIX || route.url.startsWith(`${PREFIX}/`))
        route.config = { ...route.config, envelope: false };
    });
    app.addHook('onSend', (request, reply, _payload, done) => {
      if (request.url === PREFIX || request.url.startsWith(`${PREFIX}/`))
        reply.header('content-security-policy', DOCS_CSP);
      done();
    });
    await app.register(swaggerUi, {
      routePrefix: PREFIX,
      uiConfig: { validatorUrl: null, persistAuthorization: false, tryItOutEnabled: true },
    });
  },
  { name: 'docs', dependencies: ['envelope'] },
);
