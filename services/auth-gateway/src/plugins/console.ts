import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import fp from 'fastify-plugin';
import { GatewayError } from '../errors.ts';

const PREFIX = '/account';
/** Vite names every file under assets/ after a hash of its content, so a cache may keep it for good. */
const ASSETS = `${PREFIX}/assets/`;

// The console's own files only: no inline script or style, nothing from elsewhere, never framed (a
// framed "Delete account" button could be clickjacked), forms never posted (the page sends JSON).
const CONSOLE_CSP = [
  "default-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export interface ConsoleOptions {
  /** `CONSOLE_ENABLED`. */
  serve: boolean;
  /** The console's build output (`apps/console/dist` unless `CONSOLE_DIR` says otherwise). */
  dir: string;
}

const isConsoleUrl = (url: string) =>
  url === PREFIX || url.startsWith(`${PREFIX}/`) || url.startsWith(`${PREFIX}?`);

/** Whether `url` names a file of the console's build in `root` (its page for `/account` and `/account/`). */
function isConsoleFile(root: string, url: string): boolean {
  let relative: string;
  try {
    relative = decodeURIComponent((url.split('?')[0] ?? '').slice(PREFIX.length));
  } catch {
    return false;
  }
  if (/(^|[\\/])\./.test(relative)) return false;
  const file = path.join(
    root,
    relative === '' || relative.endsWith('/') ? `${relative}/index.html` : relative,
  );
  if (!file.startsWith(`${root}${path.sep}`)) return false;
  try {
    return statSync(file, { throwIfNoEntry: false })?.isFile() === true;
  } catch {
    // A name the file system refuses (a null byte, too long): no file of the console's.
    return false;
  }
}

/**
 * The account console (apps/console, built by Vite) at `/account/`, from the API's own origin: no
 * CORS and no token in any URL. Static files, not part of the API: not enveloped (a file is sent as
 * a stream, which the envelope never wraps) and hidden from the OpenAPI document. Without a build the
 * gateway still starts and `/account/` answers the enveloped 404 saying how to build it.
 */
export default fp<ConsoleOptions>(
  async function consolePlugin(app, { serve, dir }) {
    if (!serve) return;
    const root = path.resolve(dir);

    app.addHook('onSend', (request, reply, _payload, done) => {
      if (isConsoleUrl(request.url)) {
        reply.header('content-security-policy', CONSOLE_CSP);
        // A page that opened the console keeps no handle on it (to send it elsewhere later).
        reply.header('cross-origin-opener-policy', 'same-origin');
        // http-security's hook, which runs before this one, made it no-store; the page is revalidated.
        // A 304 carries the asset's headers too: a cache updates what it stored from them.
        const immutable = request.url.startsWith(ASSETS) && [200, 304].includes(reply.statusCode);
        reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
      }
      done();
    });

    if (!existsSync(path.join(root, 'index.html'))) {
      app.log.warn({ dir: root }, `no account console in ${root} (CONSOLE_DIR): /account/ answers 404`);
      const notBuilt = async () => {
        throw new GatewayError('ROUTE_NOT_FOUND', [
          'The account console is not built: run `pnpm --filter @tessera/console build`, or set CONSOLE_DIR to its build',
        ]);
      };
      app.get(PREFIX, { schema: { hide: true } }, notBuilt);
      app.get(`${PREFIX}/*`, { schema: { hide: true } }, notBuilt);
      return;
    }

    // The console's files are not counted by the general limit: a client over it still gets the page,
    // whose own calls to the API then say how long to wait, instead of a JSON envelope in its place.
    // Anything else under /account/ (a missing file, a dotfile, a way out of the folder) is counted.
    app.addHook('onRoute', (route) => {
      if (isConsoleUrl(route.url))
        route.config = {
          ...route.config,
          exemptFromRateLimit: (request) => isConsoleFile(root, request.url),
        };
    });
    await app.register(fastifyStatic, {
      root,
      // Without the trailing slash, so that `/account` is redirected to `/account/`.
      prefix: PREFIX,
      redirect: true,
      index: 'index.html',
      // Files are looked up when asked for, so a rebuild needs no restart.
      wildcard: true,
      dotfiles: 'ignore',
      // Set above, per kind of file.
      cacheControl: false,
      // Swagger UI registers its own copy of this plugin; the console needs no reply decorators.
      decorateReply: false,
      schemaHide: true,
    });
  },
  { name: 'console', dependencies: ['http-security', 'error-handler'] },
);
