import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startGateway, type TestGateway } from './helpers.ts';

// The gateway as an operator starts it, with something wrong: one line on stderr says what, exit 1.
const SERVICE_DIR = fileURLToPath(new URL('..', import.meta.url));

let base: TestGateway;
beforeAll(async () => {
  base = await startGateway();
});
afterAll(() => base?.close());

function start(env: Record<string, string>) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['src/server.ts'],
      {
        cwd: SERVICE_DIR,
        // Started from its sources, which takes seconds on a loaded machine.
        timeout: 30_000,
        env: {
          PATH: process.env.PATH ?? '',
          APP_ENV: 'test',
          LOG_LEVEL: 'silent',
          DATABASE_URL: base.config.database.url,
          REDIS_URL: base.config.redis.url,
          REDIS_KEY_PREFIX: base.config.redis.keyPrefix,
          BULLMQ_PREFIX: base.config.mail.queuePrefix,
          OTP_SECRET: base.config.otp.secret,
          JWT_PRIVATE_KEY: base.config.jwt.privateKey ?? '',
          HOST: '127.0.0.1',
          PORT: '0',
          OPS_HOST: '127.0.0.1',
          OPS_PORT: '0',
          ...env,
        },
      },
      // Killed by the timeout, it has no exit code: null, not 0 or 1.
      (error, _stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stderr }),
    );
  });
}

it.each([
  {
    what: 'a database that does not exist',
    env: () => ({ DATABASE_URL: `${base.config.database.url}_missing` }),
    line: /^Tessera gateway failed to start: postgres is unavailable: database "\w+_missing" does not exist$/,
  },
  {
    what: 'a Redis that is not there',
    // Port 1: a privileged port no test can take.
    env: () => ({ REDIS_URL: 'redis://127.0.0.1:1' }),
    line: /^Tessera gateway failed to start: redis is unavailable: connect ECONNREFUSED 127\.0\.0\.1:1$/,
  },
  {
    what: 'an operations address of another machine',
    env: () => ({ OPS_HOST: '192.0.2.1' }),
    line: /^Tessera gateway failed to start: OPS_HOST, OPS_PORT: listen EADDRNOTAVAIL: address not available 192\.0\.2\.1\b/,
  },
])('stops with one line naming the cause: $what', async ({ env, line }) => {
  const { code, stderr } = await start(await env());

  expect(code).toBe(1);
  expect(stderr.trim()).toMatch(line);
});
