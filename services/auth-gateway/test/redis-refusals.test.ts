import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type PrivateRedis, startPrivateRedis } from '@tessera/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, body, post, signIn, startGateway, type TestGateway } from './helpers.ts';

// A Redis of this file's own, made to refuse the gateway's commands as real ones do: a replica
// (READONLY), a full one (OOM), one whose snapshot failed (MISCONF), one short of replicas
// (NOREPLICAS), one that is down.
let redis: PrivateRedis;
let admin: Redis;
let gateway: TestGateway;
beforeAll(async () => {
  // Protected configs (its folder) may be set: a snapshot is made to fail by moving it.
  redis = await startPrivateRedis(['--enable-protected-configs', 'yes']);
  admin = new Redis(redis.url, { retryStrategy: () => 200 });
  gateway = await startGateway({ REDIS_URL: redis.url, RATE_LIMIT_MAX: '1000' });
});
afterAll(async () => {
  await gateway?.close();
  admin?.disconnect();
  await redis?.remove();
});

/** A snapshot that fails (its folder gone as it writes), with snapshots configured: Redis's MISCONF. */
async function failSnapshot() {
  const [, dir] = (await admin.config('GET', 'dir')) as [string, string];
  const gone = await mkdtemp(path.join(tmpdir(), 'tessera-redis-gone-'));
  try {
    await admin.config('SET', 'dir', gone);
  } finally {
    await rm(gone, { recursive: true });
  }
  await admin.config('SET', 'save', '3600 1');
  await admin.bgsave();
  await vi.waitFor(async () => expect(await admin.info('persistence')).toMatch(/rdb_last_bgsave_status:err/));
  await admin.config('SET', 'dir', dir);
}

let people = 0;
const send = () => post(gateway.app, '/api/v1/auth/send-otp-email', { email: `p${++people}@example.com` });

/** The 503 of API.md §3 for an outage: enveloped, with Retry-After. */
function expectUnavailable(response: Awaited<ReturnType<typeof send>>) {
  expect(response.statusCode).toBe(503);
  expect(response.headers['retry-after']).toBe('5');
  expect(body(response)).toMatchObject({ isSuccess: false, statusCode: 503, data: null });
}

describe('Redis refusing writes', () => {
  it.each([
    {
      reply: 'READONLY',
      refuse: () => admin.call('REPLICAOF', '127.0.0.1', '1'),
      restore: () => admin.call('REPLICAOF', 'NO', 'ONE'),
    },
    {
      reply: 'OOM',
      refuse: () => admin.config('SET', 'maxmemory', '1'),
      restore: () => admin.config('SET', 'maxmemory', '0'),
    },
    {
      // Its snapshot failed (a full disk, most often): Redis refuses writes until one succeeds.
      reply: 'MISCONF',
      refuse: failSnapshot,
      restore: () => admin.config('SET', 'save', ''),
    },
    {
      reply: 'NOREPLICAS',
      refuse: () => admin.config('SET', 'min-replicas-to-write', '1'),
      restore: () => admin.config('SET', 'min-replicas-to-write', '0'),
    },
  ])(
    'is an outage when it answers $reply: 503 with Retry-After, then served again',
    async ({ refuse, restore }) => {
      const { accessToken } = await signIn(gateway.app, `signed-in.${++people}@example.com`);
      const me = () => gateway.app.inject({ url: '/api/v1/users/me', headers: bearer(accessToken) });
      await refuse();
      try {
        expectUnavailable(await send());
        // What only reads Redis goes on meanwhile: the signed-in user is still let in.
        expect((await me()).statusCode).toBe(200);
      } finally {
        await restore();
      }
      expect((await send()).statusCode).toBe(200);
    },
  );
});

describe('Redis down', () => {
  it('lets requests through the general limit, and answers 503 to what needs Redis', async () => {
    await redis.stop();
    try {
      const jwks = await gateway.app.inject({ url: '/.well-known/jwks.json' });
      expect(jwks.statusCode).toBe(200);
      expect(jwks.json().keys).toHaveLength(1);
      expectUnavailable(await send());
    } finally {
      await redis.start();
    }
    await expect.poll(async () => (await send()).statusCode, { timeout: 10_000 }).toBe(200);
  });
});
