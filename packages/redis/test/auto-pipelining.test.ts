import { createTestRedis } from '@tessera/testing';
import type { Redis, Result } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis } from '../src/index.ts';

// ioredis is patched (patches/ioredis@6.0.0.patch): an auto-pipelined batch inherits the client's
// Lua scripts from a prototype made once per client, instead of copying each onto every batch.
// The scripts this test defines, typed as ioredis types custom commands.
declare module 'ioredis' {
  interface RedisCommander<Context> {
    addTo(key: string, by: number): Result<number, Context>;
    readBack(key: string): Result<string, Context>;
    readBackBuffer(key: string): Result<Buffer, Context>;
  }
}

const redis = createTestRedis();
const client = createRedis({ url: redis.url, clusterNodes: '' }, 'commands', () => {}, {
  keyPrefix: redis.keyPrefix,
  enableAutoPipelining: true,
}) as Redis;
// The role connects when asked and fails fast while disconnected (no offline queue).
beforeAll(() => client.connect());
afterAll(async () => {
  await redis.flush();
  await closeRedis(client);
});

describe('auto-pipelined Lua scripts', () => {
  it('run in one batch with plain commands, also those defined after the first batch', async () => {
    client.defineCommand('addTo', { numberOfKeys: 1, lua: "return redis.call('incrby', KEYS[1], ARGV[1])" });
    const first = await Promise.all([
      client.addTo('counter', 2),
      client.incr('counter'),
      client.addTo('counter', 3),
    ]);
    expect(first).toEqual([2, 3, 6]);

    client.defineCommand('readBack', { numberOfKeys: 1, lua: "return redis.call('get', KEYS[1])" });
    const second = await Promise.all([client.addTo('counter', 4), client.readBack('counter')]);
    expect(second).toEqual([10, '10']);

    // A pipeline made by hand has them too, its Buffer variants included.
    const [[, value], [, raw]] = (await client
      .pipeline()
      .readBack('counter')
      .readBackBuffer('counter')
      .exec()) as [[null, string], [null, Buffer]];
    expect([value, raw.toString()]).toEqual(['10', '10']);
  });
});
