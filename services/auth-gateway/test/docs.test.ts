import { isDeepStrictEqual } from 'node:util';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScript, startGateway, type TestGateway } from './helpers.ts';

let gateway: TestGateway;
// biome-ignore lint/suspicious/noExplicitAny: the document is walked field by field
let document: Record<string, any>;
// biome-ignore lint/suspicious/noExplicitAny: the document is walked field by field
type Json = Record<string, any>;
beforeAll(async () => {
  gateway = await startGateway();
  const response = await gateway.app.inject({ url: '/docs/json' });
  expect(response.statusCode).toBe(200);
  document = response.json();
});
afterAll(() => gateway.close());

describe('pnpm --filter @tessera/auth-gateway openapi', () => {
  it('says in one line that it failed, and ends with exit code 1, when Redis does not answer', async () => {
    const run = await runScript(['scripts/openapi.ts'], {
      DATABASE_URL: gateway.config.database.url,
      REDIS_URL: 'redis://127.0.0.1:1',
    });
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: 'Writing the OpenAPI document failed: redis is unavailable\n',
    });
  });
});

const SCHEMAS = '#/components/schemas/';

/** A schema as a generator reads it: a `$ref` to a named schema is that schema. */
function resolve(schema: Json): Json {
  if (typeof schema.$ref !== 'string') return schema;
  expect(schema.$ref).toMatch(new RegExp(`^${SCHEMAS}`));
  const named = document.components.schemas[schema.$ref.slice(SCHEMAS.length)];
  expect(named, schema.$ref).toBeDefined();
  return named;
}

/** Every route the gateway answers, as `METHOD /path`: HEAD copies, CORS preflights and the consoles aside. */
function registeredRoutes(): string[] {
  const routes = new Set<string>();
  const prefixes: string[] = [];
  for (const line of gateway.app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /── (\S+) \(([A-Z, ]+)\)/.exec(line);
    if (!match?.[1] || !match[2]) continue;
    const depth = (line.indexOf('── ') - 1) / 4;
    const path = (prefixes[depth - 1] ?? '') + match[1];
    prefixes[depth] = path;
    if (path.startsWith('/docs') || path.startsWith('/account') || path === '*') continue;
    for (const method of match[2].split(', '))
      if (method !== 'HEAD' && method !== 'OPTIONS') routes.add(`${method} ${path}`);
  }
  return [...routes].sort();
}

const PROTECTED =
  /^(POST \/api\/v1\/auth\/(revoke-token|logout)|(GET|DELETE) \/api\/v1\/auth\/sessions|.* \/api\/v1\/users\/)/;

describe('GET /docs/json', () => {
  it('is an OpenAPI 3.1 document that a standard validator accepts', async () => {
    const validator = new Validator();
    const result = await validator.validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('documents every route the gateway answers, with a schema for each status, all enveloped', () => {
    const documented = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.keys(operations as object).map(
        (method) => `${method.toUpperCase()} ${path.replaceAll(/\{(\w+)\}/g, ':$1')}`,
      ),
    );
    expect(documented.sort()).toEqual(registeredRoutes());
    for (const [path, operations] of Object.entries(document.paths))
      for (const [method, operation] of Object.entries(operations as Record<string, { responses: object }>))
        for (const [status, response] of Object.entries(operation.responses)) {
          const media = (response as { content?: Record<string, { schema: Json }> }).content?.[
            'application/json'
          ];
          const where = `${method} ${path} ${status}`;
          expect(media?.schema, where).toBeDefined();
          const schema = media && resolve(media.schema);
          if (path !== '/.well-known/jwks.json' || status !== '200')
            expect(Object.keys(schema?.properties ?? {}).sort(), where).toEqual([
              'data',
              'errors',
              'isSuccess',
              'statusCode',
              'timestamp',
            ]);
        }
  });

  it('puts bearerAuth (http bearer, JWT) on exactly the routes that need a token', () => {
    expect(document.components.securitySchemes.bearerAuth).toEqual({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    for (const [path, operations] of Object.entries(document.paths))
      for (const [method, operation] of Object.entries(
        operations as Record<string, { security?: unknown }>,
      )) {
        const route = `${method.toUpperCase()} ${path}`;
        // No global requirement: each operation says its own, `[]` for "no token" (not left unsaid).
        expect(operation.security, route).toEqual(PROTECTED.test(route) ? [{ bearerAuth: [] }] : []);
      }
    expect(document.security).toBeUndefined();
  });

  it('documents the pagination parameters, request examples and the closed list of event types', () => {
    const list = document.paths['/api/v1/auth/sessions'].get;
    expect(list.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`).sort()).toEqual([
      'query:limit',
      'query:page',
    ]);
    // Both have defaults: a client may leave them out, as the API does.
    expect(list.parameters.map((p: { required?: boolean }) => p.required ?? false)).toEqual([false, false]);
    const verify =
      document.paths['/api/v1/auth/verify-otp-email'].post.requestBody.content['application/json'];
    expect(verify.example).toMatchObject({ email: 'alice@example.com', code: '0421' });
    const page = resolve(
      document.paths['/api/v1/users/me/security-events'].get.responses['200'].content['application/json']
        .schema.properties.data,
    );
    const events = resolve(resolve(page.properties.list.items).properties.type);
    expect(events.enum).toEqual(expect.arrayContaining(['sign_in', 'refresh_reuse', 'deletion_requested']));
  });
});

describe('what a client or its generator reads', () => {
  const operations = () =>
    Object.entries(document.paths).flatMap(([path, byMethod]) =>
      Object.entries(byMethod as Record<string, Json>).map(([method, operation]) => ({
        route: `${method.toUpperCase()} ${path}`,
        operation,
      })),
    );

  it('names every operation with a unique camelCase operationId, and sums each up', () => {
    const ids = operations().map(({ route, operation }) => {
      expect(operation.operationId, route).toMatch(/^[a-z][A-Za-z0-9]*$/);
      expect(operation.summary, route).toEqual(expect.stringMatching(/\S/));
      return operation.operationId;
    });
    expect(ids).toHaveLength(16);
    expect(new Set(ids).size).toBe(ids.length);
    // The names of API.md §8, which generated clients expose as method names: changing one breaks them.
    const byRoute = Object.fromEntries(
      operations().map(({ route, operation }) => [route, operation.operationId]),
    );
    expect(byRoute).toMatchObject({
      'POST /api/v1/auth/send-otp-email': 'sendOtpEmail',
      'POST /api/v1/auth/verify-otp-email': 'verifyOtpEmail',
      'POST /api/v1/auth/refresh-token': 'refreshToken',
      'POST /api/v1/auth/revoke-token': 'revokeToken',
      'POST /api/v1/auth/logout': 'logout',
      'GET /api/v1/auth/sessions': 'listSessions',
      'DELETE /api/v1/auth/sessions/{id}': 'endSession',
      'GET /api/v1/users/me': 'getMe',
      'PATCH /api/v1/users/me': 'updateMe',
    });
  });

  it('describes every response by what it means, not "Default Response"', () => {
    for (const { route, operation } of operations())
      for (const [status, response] of Object.entries<Json>(operation.responses)) {
        expect(response.description, `${route} ${status}`).toEqual(expect.stringMatching(/\S/));
        expect(response.description, `${route} ${status}`).not.toBe('Default Response');
      }
    const verify = document.paths['/api/v1/auth/verify-otp-email'].post.responses;
    expect(verify['200'].description).toMatch(/^Signed in/);
    // An error's description starts with its canonical message (errors[0]), then what it means here.
    expect(verify['409'].description).toMatch(/^Resource already exists .*: the code is locked/);
    // The success's description is the response's, not repeated on its `data`.
    expect(verify['200'].content['application/json'].schema.properties.data.description).toBeUndefined();
  });

  it('declares the server relative to the document, so it holds behind any host', () => {
    expect(document.servers).toEqual([{ url: '/', description: expect.any(String) }]);
  });

  it('documents a closed list or null as a union of the two, as generators read it', () => {
    const user = resolve(document.components.schemas.User).properties;
    for (const field of ['gender', 'availabilityStatus', 'accountDeletionStatus'])
      expect(user[field].anyOf).toEqual([
        { type: 'string', enum: expect.arrayContaining([expect.any(String)]) },
        { type: 'null' },
      ]);
  });

  it('says that strings are trimmed before their patterns and lengths apply', () => {
    const patch = resolve(
      document.paths['/api/v1/users/me'].patch.requestBody.content['application/json'].schema,
    ).properties;
    for (const [field, schema] of Object.entries<Json>(patch)) {
      const takesText = schema.type !== 'boolean';
      expect(schema.description ?? '', field).toMatch(
        takesText ? /trimmed before it is checked/ : /^(?!.*trimmed)/,
      );
    }
    // The reviewer's case: the handle pattern is that of the trimmed value.
    expect(patch.instagram.anyOf[0].pattern).toBe('^@?(?![Ww]{3}\\.)[A-Za-z0-9._]{1,30}$');
    const email = resolve(
      document.paths['/api/v1/auth/send-otp-email'].post.requestBody.content['application/json'].schema,
    ).properties.email;
    expect(email.description).toMatch(/trimmed and the address is lower-cased before it is checked/);
  });

  it('groups every operation under a tag the document describes', () => {
    const described = (document.tags as { name: string }[]).map((tag) => tag.name);
    for (const { route, operation } of operations()) {
      expect(operation.tags, route).toHaveLength(1);
      expect(described, route).toContain(operation.tags[0]);
    }
  });

  it('declares Retry-After on every 429 and 503, and no 429 on the health probes, which are never limited', () => {
    for (const { route, operation } of operations())
      for (const status of ['429', '503'])
        if (operation.responses[status])
          expect(
            operation.responses[status].headers?.['Retry-After']?.schema,
            `${route} ${status}`,
          ).toMatchObject({
            type: 'integer',
          });
    expect(document.paths['/health/live'].get.responses['429']).toBeUndefined();
    expect(document.paths['/health/ready'].get.responses['429']).toBeUndefined();
    expect(document.paths['/api/v1/auth/send-otp-email'].post.responses['429']).toBeDefined();
  });

  it('shows a refresh handing back a new pair, not the one it was given', () => {
    const refresh = document.paths['/api/v1/auth/refresh-token'].post;
    const sent = refresh.requestBody.content['application/json'];
    const answered = refresh.responses['200'].content['application/json'];
    const sentToken = (sent.example ?? sent.schema.examples[0]).refreshToken;
    const answer =
      answered.example ?? answered.schema.examples?.[0] ?? answered.schema.properties.data.examples[0];
    expect(sentToken).toEqual(expect.any(String));
    expect(JSON.stringify(answer)).not.toContain(sentToken);
  });
});

describe('the named schemas, which generators turn into types', () => {
  const schemas = () => document.components.schemas as Record<string, Json>;
  const ref = (name: string) => ({ $ref: `${SCHEMAS}${name}` });
  const media = (part: Json) => part.content['application/json'].schema;
  const operation = (route: string) => {
    const [method = '', path = ''] = route.split(' ');
    return document.paths[path][method.toLowerCase()];
  };
  /** The schema's keywords alone: what it says about a value, not how it is described. */
  const shape = ({ description: _, examples: __, ...schema }: Json) => schema;

  it('names every shape an app works with, and says what each is', () => {
    // A generated client's type names: renaming one breaks the apps built on it.
    expect(Object.keys(schemas())).toEqual([
      'CurrentPolicies',
      'ErrorEnvelope',
      'LoginResult',
      'LogoutResult',
      'Pagination',
      'RefreshTokenBody',
      'RegistrationRequirement',
      'RegistrationStatus',
      'RevokedSession',
      'SecurityEvent',
      'SecurityEventPage',
      'SecurityEventType',
      'SendCodeBody',
      'SendCodeResult',
      'Session',
      'SessionPage',
      'TokenPair',
      'User',
      'UserPatch',
      'VerifyCodeBody',
    ]);
    for (const [name, schema] of Object.entries(schemas()))
      expect(schema.description, name).toEqual(expect.stringMatching(/\S/));
  });

  it('refers to them for every answer, body and list item, and to ErrorEnvelope for every error', () => {
    const data = (route: string) => media(operation(route).responses['200']).properties.data;
    expect(data('GET /api/v1/auth/sessions')).toEqual(ref('SessionPage'));
    expect(schemas().SessionPage?.properties.list.items).toEqual(ref('Session'));
    expect(schemas().SessionPage?.properties.pagination).toEqual(ref('Pagination'));
    expect(schemas().SecurityEventPage?.properties.list.items).toEqual(ref('SecurityEvent'));
    expect(schemas().SecurityEvent?.properties.type).toEqual(ref('SecurityEventType'));
    expect(schemas().LoginResult?.properties.user).toEqual(ref('User'));
    expect(schemas().RegistrationStatus?.properties.missing.items).toEqual(ref('RegistrationRequirement'));
    const answers = {
      'POST /api/v1/auth/send-otp-email': 'SendCodeResult',
      'POST /api/v1/auth/verify-otp-email': 'LoginResult',
      'POST /api/v1/auth/refresh-token': 'TokenPair',
      'POST /api/v1/auth/revoke-token': 'RevokedSession',
      'POST /api/v1/auth/logout': 'LogoutResult',
      'DELETE /api/v1/auth/sessions/{id}': 'RevokedSession',
      'GET /api/v1/users/me': 'User',
      'PATCH /api/v1/users/me': 'User',
      'GET /api/v1/users/me/registration': 'RegistrationStatus',
      'GET /api/v1/users/me/security-events': 'SecurityEventPage',
      'POST /api/v1/users/me/deletion': 'User',
      'DELETE /api/v1/users/me/deletion': 'User',
    };
    for (const [route, name] of Object.entries(answers)) expect(data(route), route).toEqual(ref(name));
    const bodies = {
      'POST /api/v1/auth/send-otp-email': 'SendCodeBody',
      'POST /api/v1/auth/verify-otp-email': 'VerifyCodeBody',
      'POST /api/v1/auth/refresh-token': 'RefreshTokenBody',
      'POST /api/v1/auth/revoke-token': 'RefreshTokenBody',
      'PATCH /api/v1/users/me': 'UserPatch',
    };
    for (const [route, name] of Object.entries(bodies))
      expect(media(operation(route).requestBody), route).toEqual(ref(name));
    for (const [path, operations] of Object.entries<Json>(document.paths))
      for (const [method, { responses }] of Object.entries<Json>(operations))
        for (const [status, response] of Object.entries<Json>(responses))
          if (Number(status) >= 400)
            expect(media(response), `${method} ${path} ${status}`).toEqual(ref('ErrorEnvelope'));
  });

  it('resolves every $ref, with nothing beside it, and names nothing that is not used', () => {
    const used = new Set<string>();
    const visit = (value: unknown, where: string): void => {
      if (typeof value !== 'object' || value === null) return;
      const node = value as Json;
      if ('$ref' in node) {
        expect(Object.keys(node), where).toEqual(['$ref']);
        // A JSON pointer into this document (RFC 6901), as every generator follows it.
        const target = (node.$ref as string)
          .replace(/^#\//, '')
          .split('/')
          .reduce<unknown>(
            (at, token) => (at as Json | undefined)?.[token.replaceAll('~1', '/').replaceAll('~0', '~')],
            document,
          );
        expect(target, `${where}: ${node.$ref}`).toEqual(expect.any(Object));
        used.add(node.$ref as string);
      }
      for (const [key, child] of Object.entries(node)) visit(child, `${where}/${key}`);
    };
    visit(document, '#');
    expect([...used].filter((target) => target.startsWith(SCHEMAS)).sort()).toEqual(
      Object.keys(schemas()).map((name) => `${SCHEMAS}${name}`),
    );
  });

  it('names no shape twice, and leaves no copy of a named shape inline', () => {
    const named = Object.entries(schemas());
    for (const [i, [name, schema]] of named.entries())
      for (const [other, otherSchema] of named.slice(i + 1))
        expect(isDeepStrictEqual(shape(schema), shape(otherSchema)), `${name} and ${other}`).toBe(false);
    const inline: string[] = [];
    const visit = (value: unknown, where: string): void => {
      if (typeof value !== 'object' || value === null) return;
      for (const [name, schema] of named)
        if (isDeepStrictEqual(shape(value as Json), shape(schema))) inline.push(`${where} is ${name}`);
      for (const [key, child] of Object.entries(value)) visit(child, `${where}/${key}`);
    };
    visit(document.paths, '#/paths');
    expect(inline).toEqual([]);
  });
});

describe('examples', () => {
  /** The examples of a request body or response in the document, wherever @fastify/swagger put them. */
  // biome-ignore lint/suspicious/noExplicitAny: the document is walked field by field
  function examplesOf(media: any): unknown[] {
    if (media === undefined) return [];
    if ('example' in media) return [media.example];
    if (media.examples)
      return Object.values(media.examples).map((example) => (example as { value: unknown }).value);
    return media.schema?.examples ?? [];
  }

  it('shows every request body and every success answer with an example that its own schema accepts', () => {
    const ajv = addFormats.default(new Ajv2020({ strict: false }));
    const problems: string[] = [];
    for (const [path, operations] of Object.entries<Record<string, Json>>(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const media: Array<[string, Json | undefined]> = [
          ['request', operation.requestBody?.content['application/json']],
          ...Object.entries<Json>(operation.responses)
            .filter(([status]) => status.startsWith('2'))
            .map(([status, response]): [string, Json | undefined] => [
              status,
              response.content?.['application/json'],
            ]),
        ];
        for (const [what, content] of media) {
          if (what === 'request' && content === undefined) continue;
          const examples = examplesOf(content);
          if (examples.length === 0) problems.push(`${method} ${path} ${what}: no example`);
          // The named schemas beside it, where its `$ref`s point.
          const validate = ajv.compile({ ...content?.schema, components: document.components });
          for (const example of examples)
            if (!validate(example))
              problems.push(`${method} ${path} ${what}: ${ajv.errorsText(validate.errors)}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('GET /docs', () => {
  it('serves the console from the gateway itself, with a CSP that allows only its own files', async () => {
    // With a query string too: the API's CSP (nothing may load) would leave the page blank.
    for (const url of ['/docs', '/docs?from=readme', '/docs/?from=readme']) {
      const served = await gateway.app.inject({ url });
      expect(served.headers['content-type'], url).toMatch(/^text\/html/);
      expect(served.headers['content-security-policy'], url).toContain("script-src 'self'");
    }
    const page = await gateway.app.inject({ url: '/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/https?:/);
    // A page that opened it cannot send it elsewhere later.
    expect(page.headers['cross-origin-opener-policy']).toBe('same-origin');
    // Every script and stylesheet the page loads is a path on this server.
    for (const [, src] of page.body.matchAll(/(?:src|href)="([^"]+)"/g))
      expect(src).not.toMatch(/^(https?:)?\/\//);
    const script = /src="\.\/static\/([^"]+\.js)"/.exec(page.body)?.[1] ?? '';
    expect((await gateway.app.inject({ url: `/docs/static/${script}` })).statusCode).toBe(200);
  });

  it('is not served when DOCS_ENABLED=false', async () => {
    const hidden = await startGateway({ DOCS_ENABLED: 'false' });
    try {
      expect((await hidden.app.inject({ url: '/docs' })).statusCode).toBe(404);
      expect((await hidden.app.inject({ url: '/docs/json' })).statusCode).toBe(404);
    } finally {
      await hidden.close();
    }
  });
});
