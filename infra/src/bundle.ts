/**
 * Bundles each service into one minified ES module, `dist/` beside its sources, which `pnpm start`,
 * the image and the end-to-end tests run: one source string instead of ~1,800 modules, so a service
 * holds less memory (README, Performance). `pnpm dev` and the unit tests run the sources.
 */
import { isAscii } from 'node:buffer';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Plugin } from 'esbuild';

const root = fileURLToPath(new URL('../..', import.meta.url));

export const BUNDLES = {
  gateway: { entry: 'services/auth-gateway/src/server.ts', output: 'services/auth-gateway/dist/server.js' },
  mailer: { entry: 'services/mailer/src/main.ts', output: 'services/mailer/dist/main.js' },
} as const;

/** V8's heap sized as `pnpm start` and the image size it (README, Operations: Memory; the Kubernetes manifests give larger semi-spaces). */
const HEAP = ['--max-semi-space-size=4', '--max-old-space-size=128'];
const TELEMETRY = ['--import', './packages/telemetry/src/register.ts'];

/** Each service's node arguments, from the repository's root, as `pnpm start` and the image run it. */
export const SERVICE_ARGS = {
  gateway: [...HEAP, ...TELEMETRY, BUNDLES.gateway.output],
  mailer: [...HEAP, ...TELEMETRY, BUNDLES.mailer.output],
};

// Loaded from node_modules as before: OpenTelemetry's instrumentation patches pg and ioredis as they
// load; pino and the docs' Swagger UI read files that sit beside their modules. (The OpenTelemetry API
// bundled in finds the SDK that `--import @tessera/telemetry/register` started: it registers globally.)
const EXTERNAL = ['pg', 'ioredis', 'pino', '@fastify/swagger-ui'];

// The packages bundled in are CommonJS modules: in an ES module they need a `require` of their own
// (its import named so that it meets no name of the bundle's).
const banner =
  "import { createRequire as bannerCreateRequire } from 'node:module'; const require = bannerCreateRequire(import.meta.url);";

// An ES module's `import` of a Node built-in reads all its exports, the lazy ones too: `node:http`'s
// WebSocket alone loads undici, ~70 modules in all. So the bundle `require`s built-ins instead, which
// loads each lazy export only when it is used.
const builtinsByRequire: Plugin = {
  name: 'builtins-by-require',
  setup(build) {
    build.onResolve({ filter: /^[a-z_:/]+$/ }, ({ path: specifier, kind }) =>
      kind === 'import-statement' && isBuiltin(specifier)
        ? { path: specifier, namespace: 'builtin' }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'builtin' }, ({ path }) => ({
      contents: `module.exports = require(${JSON.stringify(path)});`,
    }));
  },
};

/** Writes each bundle whole, by renaming, so that a service starting meanwhile reads the old one or the new. */
export async function bundle(): Promise<void> {
  // Loaded here, not with BUNDLES: every integration test file imports those paths (~30 ms for esbuild).
  const { build } = await import('esbuild');
  await Promise.all(
    Object.values(BUNDLES).map(async ({ entry, output }) => {
      const { outputFiles } = await build({
        absWorkingDir: root,
        write: false,
        entryPoints: [entry],
        outfile: output,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node24',
        external: EXTERNAL,
        plugins: [builtinsByRequire],
        banner: { js: banner },
        // Names stay as written, so stack traces still say where they are.
        minifyWhitespace: true,
        minifySyntax: true,
        // Licence comments go to `<bundle>.LEGAL.txt`: they hold letters outside ASCII, and one such
        // character makes V8 keep the whole bundle's source as two bytes per character (+3.5 MB).
        legalComments: 'external',
        logLevel: 'warning',
      });
      const code = outputFiles.find((file) => file.path === path.join(root, output));
      if (!code || !isAscii(code.contents))
        throw new Error(`${output}: a character outside ASCII (see legalComments)`);
      for (const file of outputFiles) {
        await mkdir(path.dirname(file.path), { recursive: true });
        await writeFile(`${file.path}.${process.pid}`, file.contents);
        await rename(`${file.path}.${process.pid}`, file.path);
      }
    }),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await bundle();
