import { afterAll, beforeAll, expect, it } from 'vitest';
import { envBeside, runScript, startGateway, type TestGateway } from './helpers.ts';

// The gateway as an operator starts it, with something wrong: one line on stderr says what, exit 1.
let base: TestGateway;
beforeAll(async () => {
  base = await startGateway();
});
afterAll(() => base?.close());

const start = (env: Record<string, string>) =>
  runScript(
    ['src/server.ts'],
    envBeside(base, {
      JWT_PRIVATE_KEY: base.config.jwt.privateKey ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      OPS_HOST: '127.0.0.1',
      OPS_PORT: '0',
      ...env,
    }),
  );

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

it('warns of a variable that looks like a misspelled setting, which it ignores', async () => {
  // Stopped by an operations address of another machine, once the gateway is built and has warned.
  const { code, stdout } = await start({
    CORS_ORIGIN: 'https://app.example',
    LOG_LEVEL: 'warn',
    OPS_HOST: '192.0.2.1',
  });

  expect(code).toBe(1);
  const warnings = stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  expect(warnings).toContainEqual(
    expect.objectContaining({
      level: 40,
      variable: 'CORS_ORIGIN',
      meant: 'CORS_ORIGINS',
      msg: 'CORS_ORIGIN is no setting of Tessera and is ignored: did you mean CORS_ORIGINS?',
    }),
  );
});

it('warns at start that a gateway not in production answers sign-in codes to whoever asks', async () => {
  // APP_ENV=test, as every test gateway; stopped by an operations address of another machine.
  const { code, stdout } = await start({ LOG_LEVEL: 'warn', OPS_HOST: '192.0.2.1' });

  expect(code).toBe(1);
  expect(stdout).toContain(
    '"msg":"APP_ENV=test: the send answer carries the code, so whoever reaches this gateway can sign in as anyone. Set APP_ENV=production to deploy."',
  );
});
