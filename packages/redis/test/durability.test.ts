import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, durabilityProblems } from '../src/index.ts';

const servers: Array<{ child: ChildProcess; dir: string }> = [];
afterAll(async () => {
  for (const { child, dir } of servers) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  return port;
}

/** A private redis-server of this test's own, started with `args`. */
async function redisServer(...args: string[]): Promise<string> {
  const [port, dir] = [await freePort(), await mkdtemp(path.join(tmpdir(), 'tessera-redis-'))];
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args],
    {
      stdio: 'ignore',
    },
  );
  servers.push({ child, dir });
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const client = createRedis({ url, clusterNodes: '' }, 'commands', () => {}, {
      retryStrategy: () => null,
    });
    const up = await client.connect().then(
      () => true,
      () => false,
    );
    await closeRedis(client);
    if (up) return url;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('redis-server did not start');
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
    ]);
  });

  it('finds nothing wrong with a durable Redis', async () => {
    const url = await redisServer(
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--maxmemory-policy',
      'noeviction',
    );
    expect(await problemsOf(url)).toEqual([]);
  });

  it('says nothing where CONFIG is disabled, as on managed Redis services', async () => {
    const url = await redisServer('--rename-command', 'CONFIG', '');
    expect(await problemsOf(url)).toEqual([]);
  });
});
