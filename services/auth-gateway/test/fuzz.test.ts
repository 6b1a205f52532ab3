import http, { type IncomingHttpHeaders } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { statusMessage } from '@tessera/contracts';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { body, post, signIn, startGateway, type TestGateway } from './helpers.ts';

/**
 * Property: whatever a client sends to whatever path, the gateway answers within a few seconds
 * with a 2xx or 4xx (never a 5xx), and every answer except HEAD, a CORS preflight's 204 and the JWK
 * Set is the five-field envelope whose statusCode is the HTTP status.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const TCP_RUNS = Number(process.env.FUZZ_TCP_RUNS ?? 300);
const CASE_TIMEOUT_MS = 5000;
/** FUZZ_SEED replays a reported failure (fast-check prints the seed). */
const params = (numRuns: number): fc.Parameters<unknown> => ({
  numRuns,
  ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED) } : {}),
});
const ALLOWED_ORIGIN = 'https://app.example.com';

const ROUTES = [
  '/api/v1/auth/send-otp-email',
  '/api/v1/auth/verify-otp-email',
  '/api/v1/auth/refresh-token',
  '/api/v1/auth/revoke-token',
  '/api/v1/auth/logout',
  '/api/v1/auth/sessions',
  '/api/v1/auth/sessions/00000000-0000-4000-8000-000000000000',
  '/health/live',
  '/health/ready',
  '/.well-known/jwks.json',
];

// Placeholders for the live credentials, which change during the run (logout, refresh, revoke).
// (Non-ASCII, so that JSON.stringify leaves them alone.)
const ACCESS = '⟦ACCESS⟧';
const REFRESH = '⟦REFRESH⟧';
const SESSION_ID = '⟦SESSION⟧';

type ValueOf<A> = A extends fc.Arbitrary<infer T> ? T : never;

let gateway: TestGateway;
const live = { accessToken: '', refreshToken: '', sessionId: '' };

let signIns = 0;
async function freshCredentials() {
  // A new address each time: long runs would otherwise reach the per-email send limit.
  const pair = await signIn(gateway.app, `fuzz-${signIns++}@example.com`);
  const claims = JSON.parse(Buffer.from(pair.accessToken.split('.')[1] ?? '', 'base64url').toString());
  Object.assign(live, {
    accessToken: pair.accessToken,
    refreshToken: pair.refreshToken,
    sessionId: claims.sid,
  });
}

const substitute = (text: string) =>
  text
    .replaceAll(ACCESS, live.accessToken)
    .replaceAll(REFRESH, live.refreshToken)
    .replaceAll(SESSION_ID, live.sessionId);

beforeAll(async () => {
  // TRUST_PROXY=true: a junk X-Forwarded-For becomes request.ip and reaches rate-limit keys and storage.
  gateway = await startGateway({ CORS_ORIGINS: ALLOWED_ORIGIN, TRUST_PROXY: 'true' });
  await freshCredentials();
});
afterAll(() => gateway?.close());

// ---------------------------------------------------------------------------------------------
// Arbitraries

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));

const nasty = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  '%00',
  '..',
  '../..',
  '%2e%2e',
  '%2F',
  '%E0%A4%A',
  '%',
  '%%',
  '%ZZ',
  '\ud800',
  '\udfff',
  '😀',
  'é',
  'Ω≈ç√',
  '\u202e',
  'null',
  'undefined',
  'true',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  'prototype',
  '1e309',
  '-1',
  '0',
  '1.5',
  '0x10',
  'NaN',
  'Infinity',
  "'; drop table users; --",
  '<script>alert(1)</script>',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a log4shell probe, meant literally
  '${jndi:ldap://x}',
  '\r\n',
  '\t',
);

/** Junk text: short and long, ASCII, any code point, lone surrogates, the usual suspects. */
const junk = fc.oneof(
  { weight: 3, arbitrary: nasty },
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.oneof(loneSurrogate, fc.string({ maxLength: 3 })), { maxLength: 8 })
      .map((p) => p.join('')),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 65, max: 6000 }), fc.constantFrom('a', 'é', '%', '0', '😀'))
      .map(([n, c]) => c.repeat(n)),
  },
);

/** encodeURIComponent, except that it cannot fail on a lone surrogate. */
function encode(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return Buffer.from(text, 'utf8')
      .toString('latin1')
      .replace(/[^A-Za-z0-9]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  }
}

const segment = fc.oneof(junk.map(encode), junk, fc.uuid(), fc.constant(SESSION_ID));

const path = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ROUTES) },
  { weight: 3, arbitrary: segment.map((id) => `/api/v1/auth/sessions/${id}`) },
  {
    weight: 2,
    arbitrary: fc.array(segment, { maxLength: 6 }).map((segments) => `/${segments.join('/')}`),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...ROUTES),
        fc.constantFrom(
          '/',
          '//',
          '/..',
          '/./',
          '%2F',
          ';x',
          '.json',
          '/%2e%2e/',
          '#frag',
          '%00',
          '/%E0%A4%A',
        ),
      )
      .map(([route, suffix]) => route + suffix),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '/',
      '*',
      '//health/live',
      '/api/v1/auth/../auth/sessions',
      '/API/V1/AUTH/SESSIONS',
      '/api/v1/auth/sessions/../../auth/logout',
      '/docs',
      '/metrics',
      '/api/v1/users/me',
    ),
  },
);

const queryKey = fc.oneof(
  fc.constantFrom('page', 'limit', 'page[]', 'limit[0]', 'page[a]', '__proto__', 'constructor', '', ' '),
  junk,
);
const queryValue = fc.oneof(
  fc.constantFrom(
    '1',
    '0',
    '-1',
    '2',
    '100',
    '101',
    '1.5',
    '1e3',
    'abc',
    '',
    '%00',
    '%',
    ' 2',
    '2 ',
    '１',
    '1&page=2',
  ),
  junk,
  fc.integer().map(String),
  fc.double().map(String),
  fc.bigInt().map(String),
);
const query = fc
  .array(fc.tuple(queryKey, queryValue, fc.boolean()), { maxLength: 6 })
  .map((pairs) =>
    pairs.length === 0
      ? ''
      : `?${pairs.map(([k, v, encoded]) => (encoded ? `${encode(k)}=${encode(v)}` : `${k}=${v}`)).join('&')}`,
  );

// Addresses reach the rules beyond the format (email-address.ts): Unicode domains, +tags and Gmail
// spellings (the inbox's send budget, a key of its own), and each refused kind of address.
const unicodeDomain = fc
  .string({ unit: fc.constantFrom(...'abzäöüßéñ日本😀\u0301\u200d'), minLength: 1, maxLength: 20 })
  .map((label) => `${label}.de`);
const email = fc.oneof(
  fc.emailAddress(),
  fc.emailAddress().map((e) => `  ${e.toUpperCase()} `),
  fc.tuple(fc.emailAddress(), unicodeDomain).map(([e, domain]) => e.replace(/@.*$/, `@${domain}`)),
  fc.tuple(fc.emailAddress(), junk).map(([e, tag]) => e.replace(/@.*$/, `+${tag}@gmail.com`)),
  fc.constantFrom(
    'fuzz@example.com',
    'a@b.co',
    'ü@exämple.com',
    'a@bücher.de',
    'a@xn--bcher-kva.de',
    'a@xn--.de',
    'a@xn--zz.de',
    'a@.de',
    '+@googlemail.com',
    '...@gmail.com',
    'a\u0000@b.co',
    '@',
    'a@',
    'a@b',
    'a@1.2.3.4',
    'a@b.123',
    'deleted-0@tombstone.invalid',
    `${'a'.repeat(65)}@b.co`,
    `a@${'b'.repeat(64)}.co`,
    `a@${'ü'.repeat(250)}.de`,
    `${'a'.repeat(250)}@b.co`,
  ),
  junk,
);
const code = fc.oneof(
  fc.stringMatching(/^\d{4}$/),
  fc.constantFrom('０１２３', '12345', ' 1234', '123', '12a4', '\u00001234'),
  junk,
);
const anyJson = fc.jsonValue({ maxDepth: 4 });
const fieldValue = <T>(good: fc.Arbitrary<T>) =>
  fc.oneof(
    { weight: 3, arbitrary: good },
    { weight: 1, arbitrary: anyJson },
    { weight: 1, arbitrary: fc.integer() },
  );

/** A plausible body with wrong types mixed in, and extra keys (including prototype pollution ones). */
const shapedBody = fc
  .tuple(
    fc.record(
      {
        email: fieldValue(email),
        code: fieldValue(code),
        refreshToken: fieldValue(fc.oneof(fc.constant(REFRESH), junk, fc.base64String())),
        // PATCH /users/me: text that reaches Postgres as it is
        bio: fieldValue(junk),
        name: fieldValue(junk),
        interests: fieldValue(fc.array(junk, { maxLength: 3 })),
        profilePhoto: fieldValue(junk.map((text) => `https://cdn.example.com/${text}`)),
      },
      { requiredKeys: [] },
    ),
    fc.dictionary(
      fc.oneof(junk, fc.constantFrom('__proto__', 'constructor', 'prototype', 'isAdmin')),
      anyJson,
      {
        maxKeys: 4,
      },
    ),
  )
  .map(([fields, extra]) => JSON.stringify({ ...extra, ...fields }));

const PROTO_BODIES = [
  '{"__proto__":{"isAdmin":true},"email":"a@b.co"}',
  '{"constructor":{"prototype":{"isAdmin":true}},"email":"a@b.co","code":"1234"}',
  '{"email":"a@b.co","__proto__":{"email":"b@c.co"}}',
  '{"refreshToken":{"__proto__":{"length":1}}}',
  '{"__proto__":null}',
  '{"__proto__":[]}',
];

const MALFORMED = [
  '{"email": "a@b.co",}',
  "{'email':'a@b.co'}",
  '{"email":"a@b.co"}{"email":"b@c.co"}',
  '{"email":"a@b.co"',
  'NaN',
  '1e99999',
  '"\\u00"',
  '"\\ud800"',
  '\ufeff{"email":"a@b.co"}',
  '{"email":"\\u0000"}',
  '[',
  ']',
  'null',
  'true',
  '0',
  '""',
  '{"a":1e400}',
  '\u0000',
];

type Body = { kind: string; payload?: string | Buffer };

const bodyArb: fc.Arbitrary<Body> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'none' }) },
  { weight: 6, arbitrary: shapedBody.map((payload) => ({ kind: 'shaped', payload })) },
  { weight: 2, arbitrary: anyJson.map((v) => ({ kind: 'json', payload: JSON.stringify(v) })) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 1_000, max: 20_000 }), fc.constantFrom('x', 'é', '\\u0000', '😀'))
      .map(([n, c]) => ({
        kind: 'huge',
        payload: JSON.stringify({ email: 'a@b.co', code: '1234', padding: '' }).replace(
          '""',
          `"${c.repeat(n / c.length)}"`,
        ),
      })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 100, max: 8_000 }), fc.constantFrom('[', '{"a":', '{"email":'), fc.boolean())
      .map(([depth, open, closed]) => {
        const close = open === '[' ? ']' : '}';
        return {
          kind: 'deep',
          payload: `${open.repeat(depth)}${open === '[' ? '' : '1'}${closed ? close.repeat(depth) : ''}`,
        };
      }),
  },
  { weight: 1, arbitrary: fc.constantFrom(...PROTO_BODIES).map((payload) => ({ kind: 'proto', payload })) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.string({ unit: 'binary', maxLength: 30 }), loneSurrogate).map(([s, lone]) => ({
      kind: 'unicode',
      payload: `{"email":"${lone}${s.replaceAll('"', '')}@b.co","code":"1\\u0000"}`,
    })),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => ({
      kind: 'invalid-utf8',
      payload: Buffer.concat([Buffer.from('{"email":"'), Buffer.from(bytes), Buffer.from('@b.co"}')]),
    })),
  },
  { weight: 2, arbitrary: fc.constantFrom(...MALFORMED).map((payload) => ({ kind: 'malformed', payload })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(shapedBody, fc.nat())
      .map(([text, cut]) => ({ kind: 'truncated', payload: text.slice(0, cut % Math.max(1, text.length)) })),
  },
  { weight: 2, arbitrary: fc.string({ maxLength: 200 }).map((payload) => ({ kind: 'text', payload })) },
  {
    weight: 1,
    arbitrary: fc
      .uint8Array({ maxLength: 2_000 })
      .map((bytes) => ({ kind: 'bytes', payload: Buffer.from(bytes) })),
  },
);

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/json;charset=UTF-8',
      'APPLICATION/JSON',
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'application/json, text/plain',
      'application/jsonx',
      'application/vnd.api+json',
      'application/problem+json',
      'text/plain',
      'text/plain; charset=utf-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=xyz',
      'application/octet-stream',
      '',
      ';',
      '*/*',
      'application/json; boundary=',
      'application/json; charset="utf-8"; x=y; x=z',
    ),
  },
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: junk },
);

type Auth =
  | { kind: 'missing' }
  | { kind: 'real' }
  | { kind: 'tampered'; at: number; char: string }
  | { kind: 'raw'; value: string }
  | { kind: 'twice' };

const authArb: fc.Arbitrary<Auth> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Auth>({ kind: 'missing' }) },
  { weight: 4, arbitrary: fc.constant<Auth>({ kind: 'real' }) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.nat(), fc.constantFrom('A', 'b', '_', '-', '.', '=', '+', '/', ' '))
      .map(([at, char]) => ({ kind: 'tampered', at, char }) as Auth),
  },
  { weight: 1, arbitrary: fc.constant<Auth>({ kind: 'twice' }) },
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          'Basic x',
          'Basic dXNlcjpwYXNz',
          'Bearer',
          'Bearer ',
          'Bearer  x.y.z',
          'bearer a.b.c',
          'BEARER a.b.c',
          'Bearer a.b',
          'Bearer a.b.c.d',
          'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.',
          'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.x',
          'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln',
          `Bearer ${'a'.repeat(10_000)}.b.c`,
          'Bearer a.b.c, Bearer d.e.f',
        ),
        junk.map((j) => `Bearer ${j}`),
        junk,
      )
      .map((value) => ({ kind: 'raw', value }) as Auth),
  },
);

function authorization(auth: Auth): string | string[] | undefined {
  switch (auth.kind) {
    case 'missing':
      return undefined;
    case 'real':
      return `Bearer ${ACCESS}`;
    case 'twice':
      return [`Bearer ${ACCESS}`, 'Bearer x.y.z'];
    case 'raw':
      return auth.value;
    case 'tampered': {
      // The live token is only known when the case runs: liveHeaderValue changes one character.
      return `Bearer ${ACCESS}⟦TAMPER ${auth.at} ${auth.char}⟧`;
    }
  }
}

/**
 * A request target as a client sends it: anything but visible ASCII percent-encoded, and the
 * backslash too, which WHATWG URL parsing (light-my-request, Node's client) would turn into a slash.
 */
const onTheWire = (target: string) => target.replace(/[^\u0021-\u005b\u005d-\u007e]/gu, (c) => encode(c));

/** What a header value can be on the wire: UTF-8 bytes, seen by Node as latin1, no control characters but tab. */
const wire = (text: string) =>
  Buffer.from(text, 'utf8')
    .toString('latin1')
    .replace(/[^\t\u0020-\u007e\u0080-\u00ff]/g, ' ');

function liveHeaderValue(value: string): string {
  let text = substitute(value);
  const tampered = /⟦TAMPER (\d+) (.)⟧$/su.exec(text);
  if (tampered) {
    const token = text.slice(0, tampered.index);
    const at = 'Bearer '.length + (Number(tampered[1]) % (token.length - 'Bearer '.length));
    text = token.slice(0, at) + (token[at] === tampered[2] ? 'Q' : tampered[2]) + token.slice(at + 1);
  }
  return wire(text);
}

const headerName = fc.oneof(
  fc.constantFrom(
    'x-foo',
    'accept',
    'accept-encoding',
    'accept-language',
    'cookie',
    'origin',
    'range',
    'if-none-match',
    'if-modified-since',
    'x-http-method-override',
    'x-forwarded-host',
    'x-forwarded-proto',
    'x-real-ip',
    'forwarded',
    'content-encoding',
    'content-language',
    'access-control-request-method',
    'access-control-request-headers',
    'user-agent',
    'referer',
    'host',
    'via',
    'prefer',
    'sec-fetch-mode',
  ),
  fc.stringMatching(/^[a-z][a-z0-9-]{0,24}$/),
);
const headerValue = fc.oneof(
  junk,
  fc.constantFrom(ALLOWED_ORIGIN, 'null', 'GET', 'POST', 'gzip', 'bytes=0-1', '*'),
);
const extraHeaders = fc.array(fc.tuple(headerName, headerValue), { maxLength: 6 });

const requestIdArb = fc.option(
  fc.oneof(fc.constantFrom('abc-123', 'a'.repeat(64), 'a'.repeat(65), 'a b', '../etc', '%00'), junk),
  { nil: undefined },
);
const forwardedForArb = fc.option(
  fc.oneof(
    fc.constantFrom(
      '1.2.3.4',
      '::1',
      '2001:db8::1',
      'unknown',
      '1.2.3.4, 5.6.7.8',
      '999.999.999.999',
      ', ,',
      'fe80::1%eth0',
      '[::1]:80',
    ),
    fc.ipV4(),
    fc.ipV6(),
    junk,
  ),
  { nil: undefined },
);
const originArb = fc.option(
  fc.oneof(fc.constant(ALLOWED_ORIGIN), fc.constant('https://evil.example'), junk),
  {
    nil: undefined,
  },
);

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'] as const;

/** Each route with its own method, so that most cases get past routing into hooks and handlers. */
const ENDPOINTS = [
  ['POST', '/api/v1/auth/send-otp-email'],
  ['POST', '/api/v1/auth/verify-otp-email'],
  ['POST', '/api/v1/auth/refresh-token'],
  ['POST', '/api/v1/auth/revoke-token'],
  ['POST', '/api/v1/auth/logout'],
  ['GET', '/api/v1/auth/sessions'],
  ['DELETE', '/api/v1/auth/sessions/:id'],
  ['PATCH', '/api/v1/users/me'],
  ['GET', '/api/v1/users/me/security-events'],
  ['GET', '/health/live'],
  ['GET', '/health/ready'],
  ['GET', '/.well-known/jwks.json'],
] as const;

const endpoint = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.constantFrom(...ENDPOINTS), fc.oneof(fc.constant(SESSION_ID), fc.uuid(), segment))
      .map(([[method, route], id]) => ({ method: method as string, path: route.replace(':id', id) })),
  },
  { weight: 2, arbitrary: fc.record({ method: fc.constantFrom<string>(...METHODS), path }) },
);

const requestArb = fc
  .tuple(
    endpoint,
    fc.record({
      query,
      body: bodyArb,
      contentType,
      auth: authArb,
      extra: extraHeaders,
      requestId: requestIdArb,
      forwardedFor: forwardedForArb,
      origin: originArb,
      preflight: fc.option(fc.constantFrom(...METHODS, 'junk'), { nil: undefined }),
    }),
  )
  .map(([target, rest]) => ({ ...target, ...rest }));
type FuzzRequest = ValueOf<typeof requestArb>;

/** Header name → value(s); a name given twice becomes an array (sent as two header lines). */
function headersOf(request: FuzzRequest): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  const add = (name: string, value: string | string[] | undefined) => {
    if (value === undefined) return;
    const values = (Array.isArray(value) ? value : [value]).map(liveHeaderValue);
    const previous = headers[name];
    const all =
      previous === undefined ? values : [...(Array.isArray(previous) ? previous : [previous]), ...values];
    headers[name] = all.length === 1 ? (all[0] as string) : all;
  };
  for (const [name, value] of request.extra) add(name, value);
  add('authorization', authorization(request.auth));
  add('content-type', request.contentType);
  add('x-request-id', request.requestId);
  add('x-forwarded-for', request.forwardedFor);
  add('origin', request.origin);
  add('access-control-request-method', request.preflight);
  return headers;
}

function payloadOf(request: { body: Body }): string | Buffer | undefined {
  const { payload } = request.body;
  return typeof payload === 'string' ? substitute(payload) : payload;
}

// ---------------------------------------------------------------------------------------------
// The property

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

const ENVELOPE_KEYS = ['data', 'errors', 'isSuccess', 'statusCode', 'timestamp'];
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${CASE_TIMEOUT_MS} ms: ${what}`)),
      CASE_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function checkAnswer(method: string, target: string, answer: Answer) {
  const where = `${method} ${target.slice(0, 200)} → ${answer.status} ${answer.body.slice(0, 300)}`;
  expect(answer.status, where).toBeGreaterThanOrEqual(200);
  expect(answer.status, where).toBeLessThan(500);
  expect(answer.status < 300 || answer.status >= 400, where).toBe(true);

  if (method === 'HEAD') {
    expect(answer.body, where).toBe('');
    return;
  }
  if (answer.status === 204) {
    // A CORS preflight answered by @fastify/cors: no content by definition.
    expect(method, where).toBe('OPTIONS');
    expect(answer.headers['access-control-allow-methods'], where).toBeDefined();
    expect(answer.body, where).toBe('');
    return;
  }
  if (answer.status === 200 && answer.headers['cache-control'] === 'public, max-age=300') {
    // The JWK Set: a standard document, not enveloped.
    expect(target, where).toContain('jwks.json');
    expect(Object.keys(JSON.parse(answer.body)), where).toEqual(['keys']);
    return;
  }

  if (answer.status < 400 && target.split('?')[0]?.startsWith('/docs')) {
    // The API console and its document (API.md §8.13): HTML, assets and OpenAPI, not enveloped.
    if (answer.status === 200 && target.split('?')[0] === '/docs/json')
      expect(JSON.parse(answer.body).openapi, where).toBe('3.1.0');
    return;
  }

  let json: Record<string, unknown>;
  try {
    json = JSON.parse(answer.body);
  } catch {
    throw new Error(`not JSON: ${where}`);
  }
  expect(answer.headers['content-type'], where).toMatch(/^application\/json/);
  expect(Object.keys(json).sort(), where).toEqual(ENVELOPE_KEYS);
  expect(json.statusCode, where).toBe(answer.status);
  expect(json.timestamp, where).toMatch(ISO);
  if (answer.status >= 400) {
    expect(json.isSuccess, where).toBe(false);
    expect(json.data, where).toBeNull();
    const errors = json.errors as unknown[];
    expect(Array.isArray(errors) && errors.length > 0, where).toBe(true);
    for (const error of errors) expect(typeof error, where).toBe('string');
    expect(errors[0], where).toBe(statusMessage(answer.status));
  } else {
    expect(json.isSuccess, where).toBe(true);
    expect(json.errors, where).toEqual([]);
  }
}

/** A success that ended the live session or rotated its refresh token: sign in again. */
async function afterCase(method: string, target: string, status: number) {
  if (status === 200 && method !== 'GET' && /logout|revoke-token|refresh-token|sessions\//.test(target)) {
    await freshCredentials();
  }
}

async function expectStillHealthy(email: string) {
  const ready = await gateway.app.inject({ method: 'GET', url: '/health/ready' });
  expect(ready.statusCode, ready.body).toBe(200);
  const session = await signIn(gateway.app, email);
  const sessions = await gateway.app.inject({
    method: 'GET',
    url: '/api/v1/auth/sessions',
    headers: { authorization: `Bearer ${session.accessToken}` },
  });
  expect(sessions.statusCode, sessions.body).toBe(200);
  expect(body(sessions).data.list).toHaveLength(1);
  const sent = await post(gateway.app, '/api/v1/auth/send-otp-email', { email });
  expect(sent.statusCode).toBe(200);
}

describe('fuzz: every route, any input', () => {
  it(`never answers 5xx, never hangs and always envelopes (${RUNS} cases, in process)`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(requestArb, async (request) => {
        // As a client must send them: anything but visible ASCII percent-encoded (raw bytes in the
        // request line are the socket test's job; light-my-request could not even build the URL).
        const url = onTheWire(substitute(request.path) + substitute(request.query));
        const response = await within(
          gateway.app.inject({
            method: request.method,
            url,
            headers: headersOf(request),
            payload: payloadOf(request),
          }),
          `${request.method} ${url.slice(0, 200)}`,
        );
        checkAnswer(request.method, url, {
          status: response.statusCode,
          headers: response.headers as IncomingHttpHeaders,
          body: response.body,
        });
        await afterCase(request.method, url, response.statusCode);
      }),
      params(RUNS),
    );
    console.info(`fuzz (inject): ${RUNS} cases in ${Math.round(performance.now() - started)} ms`);
    await expectStillHealthy('after-inject-fuzz@example.com');
  }, 120_000);
});

// ---------------------------------------------------------------------------------------------
// Over a real socket: Node's HTTP parser sees duplicated headers and raw bytes.

/** Header lines as raw [name, value] pairs: duplicates, conflicting lengths, framing headers. */
const rawExtraHeaders = fc.array(
  fc.oneof(
    fc.tuple(headerName, headerValue.map(wire)),
    fc.constantFrom<[string, string]>(
      ['Content-Type', 'application/json'],
      ['Content-Type', 'text/plain'],
      ['Authorization', 'Bearer x.y.z'],
      ['Authorization', `Bearer ${ACCESS}`],
      ['Host', 'evil.example'],
      ['Host', ''],
      ['X-Request-Id', 'dup-1'],
      ['X-Forwarded-For', '1.2.3.4'],
      ['Expect', '100-continue'],
      ['Expect', 'something-else'],
      ['Connection', 'upgrade'],
      ['Upgrade', 'websocket'],
      ['Upgrade', 'h2c'],
      ['TE', 'trailers'],
      ['Transfer-Encoding', 'chunked'],
      ['Transfer-Encoding', 'gzip, chunked'],
      ['Transfer-Encoding', 'identity'],
      ['Content-Encoding', 'gzip'],
      ['Content-Length', '0'],
      ['Content-Length', '-1'],
      ['Content-Length', 'abc'],
      ['Content-Length', '99999999999999999999'],
    ),
  ),
  { maxLength: 5 },
);

const tcpRequestArb = fc
  .tuple(
    endpoint,
    fc.record({
      query,
      body: bodyArb,
      contentType: contentType.map((c) => (c === undefined ? undefined : wire(c))),
      auth: authArb,
      extra: rawExtraHeaders,
      contentLength: fc.constantFrom('exact', 'twice', 'conflicting', 'none'),
      withHost: fc.boolean(),
    }),
  )
  .map(([target, rest]) => ({ ...target, ...rest }));

/** Sends with node:http, headers as a raw array so that every duplicate goes out as its own line. */
function sendHttp(port: number, request: ValueOf<typeof tcpRequestArb>, target: string): Promise<Answer> {
  const payload = payloadOf(request);
  const bytes = payload === undefined ? undefined : Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const raw: string[] = [];
  if (request.withHost) raw.push('Host', `127.0.0.1:${port}`);
  for (const [name, value] of request.extra) raw.push(name, liveHeaderValue(value));
  const auth = authorization(request.auth);
  for (const value of auth === undefined ? [] : Array.isArray(auth) ? auth : [auth])
    raw.push('Authorization', liveHeaderValue(value));
  if (request.contentType !== undefined) raw.push('Content-Type', request.contentType);
  const length = String(bytes?.length ?? 0);
  const chunked = request.extra.some(
    ([name, value]) => name.toLowerCase() === 'transfer-encoding' && /chunked/i.test(value),
  );
  if (!chunked && bytes !== undefined) {
    if (request.contentLength === 'exact' || request.contentLength === 'none')
      raw.push('Content-Length', length);
    if (request.contentLength === 'twice') raw.push('Content-Length', length, 'Content-Length', length);
    if (request.contentLength === 'conflicting')
      raw.push('Content-Length', length, 'Content-Length', `${Number(length) + 7}`);
  }
  raw.push('Connection', 'close');

  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: request.method,
      path: target,
      headers: raw,
      agent: false,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      // The answer to a request the server could not parse has a body even for HEAD (it cannot know
      // the method), which Node's client then rejects as data after the response: read the head only.
      if (request.method === 'HEAD') {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '' });
        res.resume();
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    req.end(bytes);
  });
}

/** Bytes straight onto the socket: raw UTF-8 and `..` in the request line, control bytes in headers. */
const rawRequestArb = fc.record({
  method: fc.constantFrom(...METHODS),
  target: fc.oneof(
    path,
    endpoint.map((e) => e.path),
    fc.tuple(fc.constantFrom(...ROUTES), junk).map(([route, j]) => `${route}/${j}`),
    fc.constantFrom(
      'http://evil.example/health/live',
      '/health/live?\u0000',
      '/../../etc/passwd',
      '/health/live#x',
      '/%',
    ),
  ),
  headers: fc.array(fc.tuple(headerName, junk), { maxLength: 4 }),
  body: bodyArb,
});

function sendRaw(port: number, request: ValueOf<typeof rawRequestArb>): Promise<Answer> {
  const payload = payloadOf(request);
  const bytes =
    payload === undefined ? Buffer.alloc(0) : Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const head =
    `${request.method} ${substitute(request.target)} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    request.headers
      .map(([name, value]) => `${name}: ${substitute(value).replace(/[\r\n]/g, ' ')}\r\n`)
      .join('') +
    `Content-Type: application/json\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`no HTTP response: ${JSON.stringify(text.slice(0, 200))}`));
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const headers: IncomingHttpHeaders = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      const rest = Buffer.from(text.slice(end + 4), 'latin1');
      const length = Number(headers['content-length'] ?? 0);
      // One request, one response: anything after it would be a second answer on the stream. (The
      // answer to a request too broken to parse has its body even for HEAD.)
      const bodyLength = request.method === 'HEAD' && rest.length !== length ? 0 : length;
      if (rest.length !== bodyLength)
        return reject(new Error(`more than one response: ${JSON.stringify(text.slice(0, 1500))}`));
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headers,
        body: request.method === 'HEAD' ? '' : rest.toString('utf8'),
      });
    });
    // Written, not ended: a client that half-closes loses the answer to Node (httpAllowHalfOpen is
    // false), whatever the gateway does. `Connection: close` makes the server close after answering.
    socket.write(Buffer.concat([Buffer.from(head, 'utf8'), bytes]));
  });
}

describe('fuzz: over a real socket', () => {
  let port: number;
  beforeAll(async () => {
    await gateway.app.listen({ port: 0, host: '127.0.0.1' });
    port = (gateway.app.server.address() as AddressInfo).port;
  });

  it(`never answers 5xx, never hangs and always envelopes (${TCP_RUNS} cases, node:http with raw header lines)`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(tcpRequestArb, async (request) => {
        const target = onTheWire(
          `/${substitute(request.path).replace(/^\//, '')}${substitute(request.query)}`,
        );
        const answer = await within(
          sendHttp(port, request, target),
          `${request.method} ${target.slice(0, 200)}`,
        );
        checkAnswer(request.method, target, answer);
        await afterCase(request.method, target, answer.status);
      }),
      params(TCP_RUNS),
    );
    console.info(`fuzz (node:http): ${TCP_RUNS} cases in ${Math.round(performance.now() - started)} ms`);
  }, 120_000);

  it(`never answers 5xx, never hangs and always envelopes (${TCP_RUNS} cases, raw bytes)`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(rawRequestArb, async (request) => {
        const target = substitute(request.target);
        const answer = await within(sendRaw(port, request), `${request.method} ${target.slice(0, 200)}`);
        checkAnswer(request.method, target, answer);
        await afterCase(request.method, target, answer.status);
      }),
      params(TCP_RUNS),
    );
    console.info(`fuzz (raw socket): ${TCP_RUNS} cases in ${Math.round(performance.now() - started)} ms`);
    await expectStillHealthy('after-socket-fuzz@example.com');
  }, 120_000);
});
