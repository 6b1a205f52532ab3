import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { withMigratedScratchDatabase } from '@tessera/infra/generate-types';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';

export interface Servers {
  /** Any database on the Postgres server: a scratch database is created beside it and dropped after. */
  postgresUrl: string;
  redisUrl: string;
}

/** The OpenAPI document of a gateway built in-process, as `GET /docs/json` serves it. */
export async function openApiDocument({ postgresUrl, redisUrl }: Servers): Promise<object> {
  return withMigratedScratchDatabase(postgresUrl, async (databaseUrl) => {
    // A namespace of its own: the queue's keys are removed after, and the one request's rate-limit
    // counter expires with its window.
    const namespace = `tessera-openapi-${randomBytes(6).toString('hex')}`;
    const config = loadConfig({
      APP_ENV: 'test',
      LOG_LEVEL: 'silent',
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: `${namespace}:`,
      BULLMQ_PREFIX: `${namespace}-bull`,
      // A throwaway key, so nothing is read from or written to ~/.cache.
      JWT_PRIVATE_KEY: generateKeyPairSync('ed25519')
        .privateKey.export({ format: 'pem', type: 'pkcs8' })
        .toString(),
      OTP_SECRET: randomBytes(32).toString('hex'),
      DOCS_ENABLED: 'true',
    });
    const app = await buildApp(config);
    try {
      const response = await app.inject({ url: '/docs/json' });
      if (response.statusCode !== 200) throw new Error(`GET /docs/json answered ${response.statusCode}`);
      return response.json<object>();
    } finally {
      await app.mailQueue.obliterate({ force: true });
      await app.close();
    }
  });
}

// `pnpm --filter @tessera/auth-gateway openapi`: the document on stdout, without running a server
// (a gateway is built against DATABASE_URL's Postgres server and REDIS_URL, then closed).
if (import.meta.main) {
  try {
    const document = await openApiDocument({
      postgresUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
      redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    });
    process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
  } catch (error) {
    console.error(
      `Writing the OpenAPI document failed: ${error instanceof Error ? error.message : String(error)}`,
    );
    // A gateway that failed to build may leave a client's timers behind (Redis's reconnection).
    process.exit(1);
  }
}
