import { createTestRedis } from '@tessera/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, type RedisClient, warnIfClockDiffers } from '../src/index.ts';

let client: RedisClient;
beforeAll(async () => {
  client = createRedis({ url: createTestRedis().url, clusterNodes: '' }, 'commands', () => {});
  await client.connect();
});
afterAll(() => closeRedis(client));

/** What warnIfClockDiffers says for a host whose clock is `skewMs` off: each warning's fields and message. */
async function warningsAt(skewMs: number): Promise<Array<{ clockOffsetMs: number; message: string }>> {
  const warnings: Array<{ clockOffsetMs: number; message: string }> = [];
  const log = {
    warn: (fields: object, message: string) =>
      warnings.push({ ...(fields as { clockOffsetMs: number }), message }),
  };
  await warnIfClockDiffers(client, log, () => Date.now() + skewMs);
  return warnings;
}

describe('warnIfClockDiffers', () => {
  // The test's Redis runs on this machine, so its clock is the host's; the round trip blurs a few ms.
  it("says how far this host's clock is from the Redis server's, and which way", async () => {
    const [ahead, ...others] = await warningsAt(20_000);
    expect(others).toEqual([]);
    expect(ahead?.message).toMatch(
      /^This host's clock is (19\.\d|20(\.\d)?) s ahead of the Redis server's: keep every host's clock in sync \(NTP\); see README, Operations$/,
    );
    expect(Math.abs((ahead?.clockOffsetMs ?? 0) - 20_000)).toBeLessThan(500);
    const [behind] = await warningsAt(-3_500);
    expect(behind?.message).toMatch(/^This host's clock is 3\.\d s behind the Redis server's/);
    expect(Math.abs((behind?.clockOffsetMs ?? 0) + 3_500)).toBeLessThan(500);
  });

  it('says nothing of clocks that agree', async () => {
    expect(await warningsAt(0)).toEqual([]);
  });
});
