import { isDeepStrictEqual } from 'node:util';
import swagger, { type SwaggerTransformObject } from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { type SchemaName, schemaName } from '@tessera/contracts';
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

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

// Where a named schema's name rides through @fastify/swagger's conversion; gone from the document.
const NAME = 'x-tessera-schema-name';

/**
 * A copy of a route's schema in which every schema given a name (`named`, in @tessera/contracts) says
 * it in a plain key: the name itself is a symbol, which the document's conversion would drop.
 */
function withNames(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withNames);
  if (!isObject(value)) return value;
  const copy = Object.fromEntries(Object.entries(value).map(([key, child]) => [key, withNames(child)]));
  const name = schemaName(value);
  return name ? { ...copy, [NAME]: name } : copy;
}

function transform({ schema, url }: { schema: FastifySchema; url: string }) {
  return {
    schema: schema && (withNames(successDescriptions(optionalDefaults(schema))) as FastifySchema),
    url,
  };
}

/**
 * A named schema that is a whole request body or response and says what it means there (an error's
 * meaning on that route) has had that description copied onto the body or response by
 * @fastify/swagger: it stays there, not beside the `$ref` that takes the schema's place.
 */
function dropLiftedDescriptions(paths: Json): void {
  for (const operations of Object.values(paths).filter(isObject))
    for (const operation of Object.values(operations).filter(isObject)) {
      const responses = isObject(operation.responses) ? Object.values(operation.responses) : [];
      for (const holder of [operation.requestBody, ...responses].filter(isObject))
        for (const media of Object.values(isObject(holder.content) ? holder.content : {}).filter(isObject)) {
          const { schema } = media;
          const mark = isObject(schema) ? (schema[NAME] as SchemaName | undefined) : undefined;
          if (isObject(schema) && mark?.description && schema.description === holder.description)
            delete schema.description;
        }
    }
}

/**
 * `value` with every named schema replaced by a `$ref` to `components.schemas[name]`, which it is put
 * in (inner ones first, so a named schema refers to those it holds). The component is described by
 * its name's description, else by the schema's own; a place that says more keeps it beside the `$ref`.
 * Two different schemas under one name are a mistake in the code, not for a client to guess about.
 */
function hoist(value: unknown, components: Record<string, Json>): unknown {
  if (Array.isArray(value)) return value.map((item) => hoist(item, components));
  if (!isObject(value)) return value;
  const { [NAME]: mark, ...rest } = value;
  const copy = Object.fromEntries(
    Object.entries(rest).map(([key, child]) => [key, hoist(child, components)]),
  );
  if (!mark) return copy;
  const { name, description } = mark as SchemaName;
  // An example is of one answer or body, and the document shows it there, whole.
  const { examples: _, description: own, ...schema } = copy;
  const about = description ?? own;
  const component = about === undefined ? schema : { description: about, ...schema };
  const known = components[name];
  if (known && !isDeepStrictEqual(known, component))
    throw new Error(`Two different schemas are named ${name} in the OpenAPI document`);
  components[name] = component;
  const ref = { $ref: `#/components/schemas/${name}` };
  return own === undefined || own === about ? ref : { ...ref, description: own };
}

/**
 * `{ type: ['string', 'null'], enum: [..., null] }` (one schema, so that the serializer does not check
 * a stored value against the list) documented as the union it means, as the other nullable fields
 * are: openapi-zod-client, swagger-typescript-api and typed-openapi misread the one-schema form.
 */
function nullableEnums(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(nullableEnums);
  if (!isObject(value)) return value;
  const copy = Object.fromEntries(Object.entries(value).map(([key, child]) => [key, nullableEnums(child)]));
  const { type, enum: values, ...rest } = copy;
  if (!isDeepStrictEqual(type, ['string', 'null']) || !Array.isArray(values)) return copy;
  return { ...rest, anyOf: [{ type: 'string', enum: values.filter((v) => v !== null) }, { type: 'null' }] };
}

/** The named schemas, as `components.schemas` (by name) that the operations refer to. */
const namedSchemas: SwaggerTransformObject = (document) => {
  if (!('openapiObject' in document)) return document.swaggerObject;
  const { openapiObject } = document;
  const paths = nullableEnums(openapiObject.paths ?? {}) as Json;
  dropLiftedDescriptions(paths);
  const components: Record<string, Json> = {};
  const hoisted = hoist(paths, components) as typeof openapiObject.paths;
  const sorted = Object.keys(components)
    .sort()
    .map((name) => [name, components[name]]);
  return {
    ...openapiObject,
    paths: hoisted,
    components: { ...openapiObject.components, schemas: Object.fromEntries(sorted) },
  } as typeof openapiObject;
};

/**
 * The OpenAPI 3.1 document, built from the same schemas that validate and serialize the routes, at
 * `GET /docs/json`, and the Swagger UI console over it at `/docs`. Registered before any route.
 */
export default fp<DocsOptions>(
  async function docs(app, { serve, version }) {
    await app.register(swagger, {
      transform,
      transformObject: namedSchemas,
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Tessera',
          version,
          description:
            'Email one-time-code sign-in: a 4-digit code by email, a JWT access token and a rotating refresh ' +
            'token, sessions, the profile and the account. Every response is the envelope ' +
            '`{ isSuccess, statusCode, data, errors, timestamp }`; every list is `{ list, pagination }`.',
          license: { name: 'MIT', identifier: 'MIT' },
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
    const isDocsPath = (path: string) => path === PREFIX || path.startsWith(`${PREFIX}/`);
    app.addHook('onRoute', (route) => {
      if (isDocsPath(route.url)) route.config = { ...route.config, envelope: false };
    });
    app.addHook('onSend', (request, reply, _payload, done) => {
      // Its path: a query string (`/docs?from=readme`) changes nothing.
      if (isDocsPath(request.url.split('?', 1)[0] ?? '')) {
        reply.header('content-security-policy', DOCS_CSP);
        // A page that opened this one keeps no handle on it (to send it elsewhere later).
        reply.header('cross-origin-opener-policy', 'same-origin');
      }
      done();
    });
    await app.register(swaggerUi, {
      routePrefix: PREFIX,
      uiConfig: { validatorUrl: null, persistAuthorization: false, tryItOutEnabled: true },
    });
  },
  { name: 'docs', dependencies: ['envelope'] },
);
