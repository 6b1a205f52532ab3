import { type OperationsServer, startOperationsServer } from '@tessera/telemetry';
import { startPrivateRedis } from '@tessera/testing';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createOtpStore } from '../src/modules/sign-in/otp.store.ts';
import { otpSecretCheck } from '../src/modules/sign-in/otp-secret-check.ts';
import { capturedLog, envBeside, startGateway, type TestGateway } from './helpers.ts';

// Gateways of one Redis with different OTP_SECRETs: each tells its own at start, and every minute.

const OTHER_SECRET = 'another-otp-secret-that-is-long-enough-0123456789';
const WARNING =
  /^the gateways of this Redis prefix ran with 2 different OTP_SECRETs in the last 300 seconds: /;

let base: TestGateway;
let operations: OperationsServer;
beforeAll(async () => {
  base = await startGateway();
  await base.app.ready();
  // Its own check at start, before the tests tell others' apart from it.
  await vi.waitFor(async () => expect(await base.app.redis.hlen('fleet:otp-secrets')).toBe(1));
  operations = await startOperationsServer({ host: '127.0.0.1', port: 0, checks: base.app.readiness });
});
afterAll(async () => {
  await operations?.close();
  await base?.close();
});

/** Another gateway on `base`'s database and Redis, with `env`, for the test; what it logs at `warn`. */
async function gatewayBeside(env: Record<string, string>) {
  const { lines, logStream } = capturedLog();
  const config = loadConfig(
    envBeside(base, { JWT_PRIVATE_KEY: base.config.jwt.privateKey ?? '', LOG_LEVEL: 'warn', ...env }),
  );
  const app = await buildApp(config, { logStream });
  // Closed with its test: no check of it runs in a later one.
  onTestFinished(() => app.close());
  await app.ready();
  return { app, lines };
}

/** Now, by the Redis server's clock (ms), which the record's times are by. */
async function redisNow(): Promise<number> {
  const [seconds, micros] = await base.app.redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** A gateway's check at start has run since `since`: the newest time in the fleet's record is later. */
const toldSince = (since: number) =>
  vi.waitFor(async () => {
    const times = (await base.app.redis.hvals('fleet:otp-secrets')).map(Number);
    expect(Math.max(...times)).toBeGreaterThanOrEqual(since);
  });

const storeOf = (gateway: TestGateway, secret: string) =>
  createOtpStore(gateway.app.redis, { ...gateway.config.otp, secret });

describe('one OTP_SECRET per fleet', () => {
  it('is quiet while the gateways agree, and warns, with a metric, once one runs with another', async () => {
    const since = await redisNow();
    const same = await gatewayBeside({});
    await toldSince(since);
    expect(await base.app.redis.hlen('fleet:otp-secrets')).toBe(1);
    // The reply reached Redis; a moment more for the gateway to act on it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(same.lines.filter((line) => String(line.msg).includes('OTP_SECRET'))).toEqual([]);

    const other = await gatewayBeside({ OTP_SECRET: OTHER_SECRET });
    const warned = await vi.waitFor(() => {
      const line = other.lines.find((each) => WARNING.test(String(each.msg)));
      if (!line) throw new Error('no warning yet');
      return line;
    });
    expect(warned).toMatchObject({ level: 40, otpSecrets: 2 });
    // Never the secret, nor its fingerprint.
    const fingerprints = await base.app.redis.hkeys('fleet:otp-secrets');
    expect(fingerprints).toHaveLength(2);
    for (const secretOrPrint of [OTHER_SECRET, ...fingerprints])
      expect(JSON.stringify(other.lines)).not.toContain(secretOrPrint);

    const metrics = await (await fetch(`${operations.url}/metrics`)).text();
    expect(metrics).toMatch(/^tessera_otp_secrets 2\b/m);
  });

  it('forgets a secret no gateway has told within the window, and the gauge is back to 1', async () => {
    const mine = storeOf(base, base.config.otp.secret);
    const theirs = storeOf(base, 'a-third-otp-secret-that-is-long-enough-0123456789');
    expect((await theirs.secretsTold(300_000, true)).told).toBeGreaterThanOrEqual(2);
    await new Promise((resolve) => setTimeout(resolve, 1_100));

    // Told a second ago or more: within a window of one second, only this gateway's is left.
    const { lines, logStream } = capturedLog();
    await otpSecretCheck(mine, pino({ level: 'warn' }, logStream), 1)();
    expect(lines).toEqual([]);
    expect(await base.app.redis.hlen('fleet:otp-secrets')).toBe(1);
    // Gone with its window if no gateway tells it again.
    const ttl = await base.app.redis.pttl('fleet:otp-secrets');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_000);
    const metrics = await (await fetch(`${operations.url}/metrics`)).text();
    expect(metrics).toMatch(/^tessera_otp_secrets 1\b/m);
  });
});

describe('the check, when Redis fails', () => {
  it('passes quietly, leaving the outage to the Redis client, which tells it once', async () => {
    const redis = await startPrivateRedis();
    onTestFinished(() => redis.remove());
    const own = await startGateway({ REDIS_URL: redis.url });
    onTestFinished(() => own.close());
    const { lines, logStream } = capturedLog();
    const log = pino({ level: 'debug' }, logStream);
    const check = otpSecretCheck(storeOf(own, own.config.otp.secret), log);
    await check();
    await redis.stop();
    await expect(check()).resolves.toBeUndefined();
    expect(lines).toEqual([]);
  });

  it('fails a run, for the sweep to count and log, on anything but an outage', async () => {
    const redis = await startPrivateRedis();
    onTestFinished(() => redis.remove());
    const admin = new Redis(redis.url);
    await admin.call('ACL', 'SETUSER', 'no-scripts', 'on', '>pw', '~*', '&*', '+@all', '-@scripting');
    admin.disconnect();
    const url = new URL(redis.url);
    url.username = 'no-scripts';
    url.password = 'pw';
    const own = await startGateway({ REDIS_URL: url.toString() });
    onTestFinished(() => own.close());
    const check = otpSecretCheck(storeOf(own, own.config.otp.secret), pino({ level: 'silent' }));
    await expect(check()).rejects.toThrow(/NOPERM/);
  });
});
