import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { hooklessSecurityHeaders } from '../src/plugins/http-security.ts';
import {
  bearer,
  body,
  PRODUCTION_MAIL_JOB_KEY,
  post,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

const APP = 'https://app.example.com';
const OTHER = 'https://evil.example.net';
const SESSIONS = '/api/v1/auth/sessions';

/** One gateway as in development/test with an allow-list, one in production without any. */
let withCors: TestGateway;
let production: TestGateway;
beforeAll(async () => {
  [withCors, production] = await Promise.all([
    startGateway({ CORS_ORIGINS: `${APP}, http://localhost:5173` }),
    startGateway({ APP_ENV: 'production', MAIL_JOB_KEY: PRODUCTION_MAIL_JOB_KEY }),
  ]);
});
afterAll(() => Promise.all([withCors?.close(), production?.close()]));

function expectSecurityHeaders(response: LightMyRequestResponse) {
  expect(response.headers).toMatchObject({
    'content-security-policy': "default-src 'none';frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cross-origin-resource-policy': 'same-origin',
    'cache-control': 'no-store',
  });
  // Document-only headers are left out of a JSON API.
  expect(response.headers['cross-origin-opener-policy']).toBeUndefined();
  expect(response.headers['x-powered-by']).toBeUndefined();
}

function expectEnvelope(response: LightMyRequestResponse, status: number) {
  expect(response.statusCode).toBe(status);
  expect(Object.keys(body(response)).sort()).toEqual([
    'data',
    'errors',
    'isSuccess',
    'statusCode',
    'timestamp',
  ]);
  expect(body(response).statusCode).toBe(status);
}

const preflight = (url: string, origin: string, method = 'GET') =>
  withCors.app.inject({
    method: 'OPTIONS',
    url,
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': 'authorization,content-type',
    },
  });

describe('security headers', () => {
  it('are on a success', async () => {
    const response = await withCors.app.inject({ method: 'GET', url: '/health/live' });
    expect(response.statusCode).toBe(200);
    expectSecurityHeaders(response);
  });

  it('are on an enveloped 404', async () => {
    const response = await withCors.app.inject({ method: 'GET', url: '/api/v1/nope' });
    expectEnvelope(response, 404);
    expectSecurityHeaders(response);
  });

  it('are on a 400 from validation and on a 401 from authentication', async () => {
    const invalid = await post(withCors.app, '/api/v1/auth/send-otp-email', { email: 42 });
    expectEnvelope(invalid, 400);
    expectSecurityHeaders(invalid);
    const unauthenticated = await withCors.app.inject({ method: 'GET', url: SESSIONS });
    expectEnvelope(unauthenticated, 401);
    expectSecurityHeaders(unauthenticated);
  });

  it('are on a 400 for a URL that cannot be decoded, which skips every hook', async () => {
    const response = await withCors.app.inject({ method: 'GET', url: '/api/v1/auth/sessions/%E0%A4%A' });
    expectEnvelope(response, 400);
    expectSecurityHeaders(response);
    expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('hookless headers are exactly what helmet sets, in every environment', async () => {
    for (const gateway of [withCors, production]) {
      const response = await gateway.app.inject({ method: 'GET', url: '/health/live' });
      const expected = hooklessSecurityHeaders(gateway.config.env);
      const names = [
        ...Object.keys(expected),
        'strict-transport-security',
        'x-xss-protection',
        'x-dns-prefetch-control',
        'x-download-options',
        'x-permitted-cross-domain-policies',
        'origin-agent-cluster',
        'cross-origin-opener-policy',
        'cross-origin-embedder-policy',
      ];
      const sent = Object.fromEntries(
        names.filter((n) => n in response.headers).map((n) => [n, response.headers[n]]),
      );
      expect(sent).toEqual(expected);
    }
  });

  it('never let a response be stored, except the public key set', async () => {
    const { accessToken } = await signIn(withCors.app, 'cache@example.com');
    const sessions = await withCors.app.inject({
      method: 'GET',
      url: SESSIONS,
      headers: bearer(accessToken),
    });
    expect(sessions.statusCode).toBe(200);
    expect(sessions.headers['cache-control']).toBe('no-store');
    const jwks = await withCors.app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    expect(jwks.statusCode).toBe(200);
    expect(jwks.headers['cache-control']).toBe('public, max-age=300');
    expect(jwks.headers['x-content-type-options']).toBe('nosniff');
  });

  it('send no HSTS outside production', async () => {
    const response = await withCors.app.inject({ method: 'GET', url: '/health/live' });
    expect(response.headers['strict-transport-security']).toBeUndefined();
  });

  it('send HSTS in production, on successes and errors alike', async () => {
    for (const url of ['/health/live', '/nope', '/api/v1/auth/sessions/%E0%A4%A']) {
      const response = await production.app.inject({ method: 'GET', url });
      expect(response.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains');
      expectSecurityHeaders(response);
    }
  });
});

describe('CORS', () => {
  it('answers a preflight from an allowed origin with 204 and the allow-list', async () => {
    const response = await preflight(SESSIONS, APP);
    expect(response.statusCode).toBe(204);
    expect(response.body).toBe('');
    expect(response.headers).toMatchObject({
      'access-control-allow-origin': APP,
      'access-control-allow-methods': 'GET, POST, DELETE, PATCH',
      'access-control-allow-headers': 'Authorization, Content-Type, X-Request-Id',
      'access-control-expose-headers': 'Retry-After, X-Request-Id, Tessera-Error-Code',
      'access-control-max-age': '600',
      vary: 'Origin',
    });
    expect(response.headers['access-control-allow-credentials']).toBeUndefined();
    expectSecurityHeaders(response);

    const second = await preflight('/api/v1/auth/sessions/1234?x=1', 'http://localhost:5173', 'DELETE');
    expect(second.statusCode).toBe(204);
    expect(second.headers['access-control-allow-origin']).toBe('http://localhost:5173');
  });

  it('allows a simple request from an allowed origin, errors included', async () => {
    const live = await withCors.app.inject({ method: 'GET', url: '/health/live', headers: { origin: APP } });
    expect(live.statusCode).toBe(200);
    expect(live.headers['access-control-allow-origin']).toBe(APP);
    expect(live.headers['access-control-expose-headers']).toBe(
      'Retry-After, X-Request-Id, Tessera-Error-Code',
    );
    expect(live.headers.vary).toBe('Origin');

    const unauthenticated = await withCors.app.inject({
      method: 'GET',
      url: SESSIONS,
      headers: { origin: APP },
    });
    expectEnvelope(unauthenticated, 401);
    expect(unauthenticated.headers['access-control-allow-origin']).toBe(APP);
    expect(unauthenticated.headers['access-control-allow-credentials']).toBeUndefined();
  });

  it('gives another origin no Access-Control-Allow-Origin, nor a look-alike of an allowed one', async () => {
    for (const origin of [
      OTHER,
      `${APP}.evil.net`,
      'https://app.example.com:443',
      'null',
      APP.toUpperCase(),
    ]) {
      const simple = await withCors.app.inject({ method: 'GET', url: '/health/live', headers: { origin } });
      expect(simple.statusCode).toBe(200);
      expect(simple.headers['access-control-allow-origin']).toBeUndefined();
      const pre = await preflight(SESSIONS, origin);
      expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    }
  });

  it('answers a preflight to an unknown route, or for a method the route lacks, with an enveloped 404', async () => {
    for (const [url, method] of [
      ['/api/v1/nope', 'GET'],
      ['/api/v1/auth/logout', 'GET'],
      [SESSIONS, 'PUT'],
    ] as const) {
      const response = await preflight(url, APP, method);
      expectEnvelope(response, 404);
      expect(body(response).errors).toEqual(['Resource not found', `No route OPTIONS ${url}`]);
      expectSecurityHeaders(response);
    }
  });

  it('answers an OPTIONS request that is not a preflight with an enveloped 404', async () => {
    const response = await withCors.app.inject({ method: 'OPTIONS', url: SESSIONS });
    expectEnvelope(response, 404);
    expectSecurityHeaders(response);
  });

  it('sends no CORS headers at all when CORS_ORIGINS is empty', async () => {
    expect(production.config.http.corsOrigins).toEqual([]);
    for (const origin of [APP, OTHER, 'null']) {
      const simple = await production.app.inject({ method: 'GET', url: '/health/live', headers: { origin } });
      expect(simple.statusCode).toBe(200);
      expect(Object.keys(simple.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
      const pre = await production.app.inject({
        method: 'OPTIONS',
        url: SESSIONS,
        headers: { origin, 'access-control-request-method': 'GET' },
      });
      // An ordinary request with a method the path does not answer.
      expectEnvelope(pre, 405);
      expect(pre.headers.allow).toBe('GET, HEAD');
      expect(Object.keys(pre.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    }
  });

  it('refuses a wildcard, or an origin not written as browsers send it, at startup with a clear message', () => {
    const notAsBrowsersSendThem = [
      'https://App.example.com',
      'https://app.example.com:443',
      'https://app.example.com/',
    ];
    for (const value of [
      '*',
      'https://app.example.com,*',
      'https://*.example.com',
      ...notAsBrowsersSendThem,
    ]) {
      expect(() => loadConfig({ CORS_ORIGINS: value })).toThrow(/CORS_ORIGINS must list exact origins/);
    }
  });
});
