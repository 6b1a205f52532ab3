import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { body, startGateway, type TestGateway } from './helpers.ts';

// A stand-in for the console's build (apps/console has the real one and its browser tests).
let build: string;
let gateway: TestGateway;
beforeAll(async () => {
  build = await mkdtemp(path.join(tmpdir(), 'tessera-console-'));
  await mkdir(path.join(build, 'assets'));
  await writeFile(
    path.join(build, 'index.html'),
    '<!doctype html><title>Account</title><script type="module" src="/account/assets/index-abc123.js"></script>',
  );
  await writeFile(path.join(build, 'assets', 'index-abc123.js'), 'console.log("console");');
  await writeFile(path.join(build, 'theme.css'), ':root { --tessera-accent: #2450b2; }');
  await writeFile(path.join(build, '.env'), 'SECRET=1');
  gateway = await startGateway({ CONSOLE_DIR: build });
});
afterAll(async () => {
  await gateway?.close();
  await rm(build, { recursive: true, force: true });
});

describe('the account console at /account/', () => {
  it('sends the page with a CSP that allows only its own files, revalidated on every visit', async () => {
    const response = await gateway.app.inject({ url: '/account/' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/html/);
    expect(response.body).toContain('<title>Account</title>');
    const csp = String(response.headers['content-security-policy']);
    expect(csp.split('; ')).toEqual([
      "default-src 'self'",
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
    ]);
    expect(csp).not.toContain('unsafe-inline');
    expect(response.headers['cache-control']).toBe('no-cache');
    expect(response.headers['x-frame-options']).toBe('DENY');
    expect(response.headers['cross-origin-opener-policy']).toBe('same-origin');
    expect(response.headers.etag).toBeDefined();
  });

  it('lets a cache keep the hashed assets for good, and revalidate the rest', async () => {
    const script = await gateway.app.inject({ url: '/account/assets/index-abc123.js' });
    expect(script.statusCode).toBe(200);
    expect(script.headers['content-type']).toMatch(/javascript/);
    expect(script.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    // Revalidated all the same (a proxy, a reload): the 304 keeps it, a cache stores its headers.
    const revalidated = await gateway.app.inject({
      url: '/account/assets/index-abc123.js',
      headers: { 'if-none-match': String(script.headers.etag) },
    });
    expect(revalidated.statusCode).toBe(304);
    expect(revalidated.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const theme = await gateway.app.inject({ url: '/account/theme.css' });
    expect(theme.statusCode).toBe(200);
    expect(theme.headers['cache-control']).toBe('no-cache');
  });

  it('redirects /account to /account/', async () => {
    const response = await gateway.app.inject({ url: '/account' });
    expect(response.statusCode).toBe(301);
    expect(response.headers.location).toBe('/account/');
  });

  it('answers an enveloped 4xx for a file it does not have, a dotfile, a name the file system refuses or a path outside the build', async () => {
    for (const url of [
      '/account/assets/missing.js',
      '/account/.env',
      '/account/%2e%2e/%2e%2e/package.json',
      '/account/index.html%00.css',
      '/account/%00',
      `/account/${'a'.repeat(300)}`,
    ]) {
      const response = await gateway.app.inject({ url });
      expect([400, 403, 404], url).toContain(response.statusCode);
      expect(body(response), url).toMatchObject({ isSuccess: false, data: null });
      expect(response.body, url).not.toContain('SECRET');
    }
  });

  it('is not part of the API document', async () => {
    const document = (await gateway.app.inject({ url: '/docs/json' })).json() as { paths: object };
    expect(Object.keys(document.paths).filter((route) => route.startsWith('/account'))).toEqual([]);
  });

  it('keeps the API itself at default-src none', async () => {
    const response = await gateway.app.inject({ url: '/health/live' });
    expect(response.headers['content-security-policy']).toBe("default-src 'none';frame-ancestors 'none'");
    expect(response.headers['cache-control']).toBe('no-store');
  });
});

describe('a client over the general limit', () => {
  it('still gets the page and its files, nothing else; the API tells it to wait', async () => {
    const limited = await startGateway({ CONSOLE_DIR: build, RATE_LIMIT_MAX: '2' });
    try {
      const from = { remoteAddress: '198.51.100.7' };
      for (let i = 0; i < 2; i++) await limited.app.inject({ url: '/api/v1/auth/sessions', ...from });
      expect((await limited.app.inject({ url: '/api/v1/auth/sessions', ...from })).statusCode).toBe(429);
      for (const url of ['/account/', '/account/assets/index-abc123.js']) {
        expect((await limited.app.inject({ url, ...from })).statusCode, url).toBe(200);
      }
      // Only the console's files: a missing one, a dotfile, a name the file system refuses or a way out of
      // the folder is counted.
      for (const url of [
        '/account/nope.js',
        '/account/.env',
        '/account/%00',
        `/account/${'a'.repeat(300)}`,
        '/account/%2e%2e/package.json',
      ]) {
        expect((await limited.app.inject({ url, ...from })).statusCode, url).toBe(429);
      }
      expect((await limited.app.inject({ url: '/api/v1/auth/sessions', ...from })).statusCode).toBe(429);
    } finally {
      await limited.close();
    }
  });
});

describe('without a build', () => {
  it('still starts, and /account/ is an enveloped 404 that says how to build it', async () => {
    const empty = await startGateway({ CONSOLE_DIR: path.join(build, 'nothing-here') });
    try {
      const response = await empty.app.inject({ url: '/account/' });
      expect(response.statusCode).toBe(404);
      expect(body(response).errors).toEqual([
        'Resource not found',
        'The account console is not built: run `pnpm --filter @tessera/console build`, or set CONSOLE_DIR to its build',
      ]);
      expect((await empty.app.inject({ url: '/health/live' })).statusCode).toBe(200);
    } finally {
      await empty.close();
    }
  });

  it('is not served at all when CONSOLE_ENABLED=false', async () => {
    const off = await startGateway({ CONSOLE_DIR: build, CONSOLE_ENABLED: 'false' });
    try {
      const response = await off.app.inject({ url: '/account/' });
      expect(response.statusCode).toBe(404);
      expect(body(response).errors).toEqual(['Resource not found', 'No route GET /account/']);
    } finally {
      await off.close();
    }
  });
});
