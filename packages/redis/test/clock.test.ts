import { createTestRedis } from '@tessera/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, type RedisClient, warnIfClockDiffers } from '../src/index.ts';

let client: RedisClient;
beforeAll(async () => {
  client = createRedis({ url: createTestRedis().url, clusterNodes: '' }, 'commands', () => {});
  await client.connect();
});
afterAll(() => closeRedis(client));

/** What warnIfClockDiffers says for a host whose clock is `skewMs` off. */
async function warningsAt(skewMs: number): Promise<string[]> {
  const warnings: string[] = [];
  await warnIfClockDiffers(
    client,
    { warn: (_, message) => warnings.push(message) },
    () => Date.now() + skewMs,
  );
  return warnings;
}

describe('warnIfClockDiffers', () => {
  it("says how far this host's clock is from the Redis server's, and which way", async () => {
    expect(await warningsAt(20_000)).toEqual([
      "This host's clock is 20 s ahead of the Redis server's: keep every host's clock in sync (NTP); see README, Operations",
    ]);
    expect((await warningsAt(-3_500))[0]).toMatch(/^This host's clock is 3\.5 s behind the Redis server's/);
  });

  it('says nothing of clocks that agree', async () => {
    expect(await warningsAt(0)).toEqual([]);
  });
});
