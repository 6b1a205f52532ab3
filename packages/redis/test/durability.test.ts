import { DURABLE_REDIS_ARGS, type PrivateRedis, startPrivateRedis } from '@tessera/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, durabilityProblems } from '../src/index.ts';

const servers: PrivateRedis[] = [];
afterAll(async () => {
  await Promise.all(servers.map((server) => server.remove()));
});

/** A private redis-server of this test's own, started with `args`. */
async function redisServer(...args: string[]): Promise<string> {
  const server = await startPrivateRedis(args);
  servers.push(server);
  return server.url;
}

async function problemsOf(url: string): Promise<string[]> {
  const client = createRedis({ url, clusterNodes: '' }, 'commands', () => {});
  await client.connect();
  try {
    return await durabilityProblems(client);
  } finally {
    await closeRedis(client);
  }
}

describe('durabilityProblems', () => {
  it('names every setting that would lose queued jobs', async () => {
    const url = await redisServer('--appendonly', 'no', '--maxmemory-policy', 'allkeys-lru');
    expect(await problemsOf(url)).toEqual([
      'appendonly=no, want yes',
      'maxmemory-policy=allkeys-lru, want noeviction',
      'maxmemory=0, want a limit below the memory Redis may use',
    ]);
  });

  it('finds nothing wrong with a durable Redis', async () => {
    const url = await redisServer(...DURABLE_REDIS_ARGS);
    expect(await problemsOf(url)).toEqual([]);
  });

  it('says nothing where CONFIG is disabled, as on managed Redis services', async () => {
    const url = await redisServer('--rename-command', 'CONFIG', '');
    expect(await problemsOf(url)).toEqual([]);
  });
});
