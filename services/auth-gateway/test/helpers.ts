import { execFile } from 'node:child_process';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, createTestRedis } from '@tessera/testing';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { type AppOptions, buildApp } from '../src/app.ts';
import { type Clock, systemClock } from '../src/clock.ts';
import { type GatewayConfig, loadConfig } from '../src/config.ts';
import { generateSigningKeyPem } from '../src/modules/tokens/keys.ts';

export interface TestGateway {
  app: Awaited<ReturnType<typeof buildApp>>;
  config: GatewayConfig;
  close(): Promise<void>;
}

/**
 * Limits out of the way of tests that exercise something else (they all come from one IP and send
 * many codes); the limits tests pass the real defaults back in.
 */
export const GENEROUS_LIMITS = {
  OTP_RESEND_COOLDOWN: '0',
  OTP_MAX_SENDS_PER_EMAIL_PER_HOUR: '1000',
  OTP_MAX_SENDS_PER_IP_PER_HOUR: '100000',
  OTP_MAX_FAILURES_PER_EMAIL_PER_DAY: '1000',
  OTP_MAX_FAILURES_PER_IP_PER_HOUR: '100000',
  RATE_LIMIT_MAX: '1000000',
};

/**
 * The real gateway on a database and Redis namespace of its own (APP_ENV=test, so the send-code
 * response carries the code), with generous limits. `env` overrides any variable.
 */
/** The environment of another gateway on `gateway`'s database and Redis, without a signing key of its own. */
export const envBeside = (gateway: TestGateway, env: Record<string, string> = {}) => ({
  APP_ENV: 'test',
  LOG_LEVEL: 'silent',
  DATABASE_URL: gateway.config.database.url,
  REDIS_URL: gateway.config.redis.url,
  REDIS_KEY_PREFIX: gateway.config.redis.keyPrefix,
  BULLMQ_PREFIX: gateway.config.mail.queuePrefix,
  OTP_SECRET: gateway.config.otp.secret,
  ...GENEROUS_LIMITS,
  ...env,
});

const SERVICE_DIR = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs a script of the gateway (`src/server.ts`, `src/keygen.ts`) with this Node, as an operator
 * would, with `env` and the PATH only. Started from its sources, it takes seconds on a loaded machine;
 * killed by the timeout, it has no exit code (null, not 0 or 1).
 */
export function runScript(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: SERVICE_DIR, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
      },
    );
  });
}

/** What production requires of `MAIL_JOB_KEY` (tests otherwise use the development key, as their mailers do). */
export const PRODUCTION_MAIL_JOB_KEY = `test:${Buffer.alloc(32, 7).toString('base64')}`;

export async function startGateway(
  env: Record<string, string> = {},
  { clock = systemClock, logStream }: AppOptions = {},
): Promise<TestGateway> {
  const database = await createTestDatabase();
  const redis = createTestRedis();
  const config = loadConfig({
    APP_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: redis.keyPrefix,
    BULLMQ_PREFIX: redis.bullmqPrefix,
    JWT_PRIVATE_KEY: generateSigningKeyPem(),
    OTP_SECRET: 'test-otp-secret-that-is-long-enough-0123456789',
    ...GENEROUS_LIMITS,
    ...env,
  });
  const app = await buildApp(config, { clock, logStream, checkResponses: true }).catch(
    async (error: unknown) => {
      // A start that fails (what a test may want) leaves nothing behind.
      await Promise.all([database.drop(), redis.flush()]);
      throw error;
    },
  );
  return {
    app,
    config,
    async close() {
      await app.close();
      await Promise.all([database.drop(), redis.flush()]);
    },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted field by field
export type Json = Record<string, any>;

export const body = (response: LightMyRequestResponse): Json => response.json();

export function post(
  app: FastifyInstance,
  url: string,
  payload: unknown,
  headers: Record<string, string> = {},
) {
  return app.inject({ method: 'POST', url, payload: payload as object, headers });
}

export const bearer = (accessToken: string) => ({ authorization: `Bearer ${accessToken}` });

/** The session id (`sid`) an access token carries. */
/** The user (`sub`) and session (`sid`) an access token names. */
export const claimsOf = (accessToken: string): { sub: string; sid: string } =>
  JSON.parse(Buffer.from(accessToken.split('.')[1] ?? '', 'base64url').toString());
export const sidOf = (accessToken: string): string => claimsOf(accessToken).sid;

/** Asks for a code and signs in with it, as a client would. */
export async function signIn(app: FastifyInstance, email: string, headers: Record<string, string> = {}) {
  const sent = await post(app, '/api/v1/auth/send-otp-email', { email });
  if (sent.statusCode !== 200) throw new Error(`sending the code failed (${sent.statusCode}): ${sent.body}`);
  const { code } = body(sent).data;
  const verified = await post(app, '/api/v1/auth/verify-otp-email', { email, code }, headers);
  if (verified.statusCode !== 200)
    throw new Error(`sign-in failed (${verified.statusCode}): ${verified.body}`);
  return { ...body(verified).data, code } as {
    code: string;
    accessToken: string;
    refreshToken: string;
    expiresIn: number;
    refreshExpiresIn: number;
    user: Json;
    isRegistrationComplete: boolean;
  };
}

/** A clock tests move by hand. */
export function manualClock(start = new Date()): Clock & { advance(seconds: number): void } {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    advance(seconds) {
      now += seconds * 1000;
    },
  };
}

// Moves one key back in time by ARGV[1] ms: its sorted-set scores (event times) and its time to live.
const AGE_KEY = `
local ms = tonumber(ARGV[1])
if redis.call('TYPE', KEYS[1]).ok == 'zset' then
  local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do redis.call('ZADD', KEYS[1], tonumber(entries[i + 1]) - ms, entries[i]) end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > ms then redis.call('PEXPIRE', KEYS[1], ttl - ms) elseif ttl > 0 then redis.call('DEL', KEYS[1]) end
`;

/**
 * Lets `seconds` go by for the gateway's Redis data. The limits count by the Redis server's clock,
 * which a test cannot move, so the data moves back instead: every event time and every time to live
 * in the gateway's key prefix, as if that much time had passed (codes expire as they would).
 */
export async function ageRedis(gateway: TestGateway, seconds: number): Promise<void> {
  const redis = new Redis(gateway.config.redis.url);
  try {
    for await (const keys of redis.scanStream({ match: `${gateway.config.redis.keyPrefix}*`, count: 500 })) {
      for (const key of keys as string[]) await redis.eval(AGE_KEY, 1, key, Math.round(seconds * 1000));
    }
  } finally {
    await redis.quit();
  }
}

/**
 * Lets `seconds` go by since every rotation of a refresh token. The grace window is measured on
 * Postgres's clock, which a test cannot move, so the rotation times move back instead.
 */
export async function ageRotations(gateway: TestGateway, seconds: number): Promise<void> {
  await sql`update refresh_tokens set rotated_at = rotated_at - make_interval(secs => ${seconds})
    where rotated_at is not null`.execute(gateway.app.db);
}

/** A log stream for a gateway (`startGateway`'s `logStream`) and the lines written to it, as objects. */
export function capturedLog(): { lines: Record<string, unknown>[]; logStream: Writable } {
  const lines: Record<string, unknown>[] = [];
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logStream };
}
