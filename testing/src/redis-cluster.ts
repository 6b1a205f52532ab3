import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, waitUntil } from './processes.ts';

const run = promisify(execFile);

export interface RedisCluster {
  /** Every master as `host:port`, comma-separated: a value for REDIS_CLUSTER_NODES. */
  nodes: string;
  /** Kills the servers and removes their folder. */
  remove(): Promise<void>;
}

/** Asks one node for its `CLUSTER INFO`; undefined while it does not answer. */
async function clusterInfo(port: number): Promise<string | undefined> {
  const client = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    retryStrategy: () => null,
    commandTimeout: 1000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return await client.cluster('INFO');
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

/**
 * A Redis Cluster of the test's own: `masters` redis-servers on free ports (no replicas, nothing
 * persisted) in a temporary folder, joined by `redis-cli --cluster create`, ready once every node
 * reports `cluster_state:ok`.
 */
export async function startRedisCluster(masters = 3): Promise<RedisCluster> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-redis-cluster-'));
  const children: ChildProcess[] = [];
  const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;
  async function remove() {
    await Promise.all(
      children.map(async (child) => {
        if (exited(child)) return;
        const gone = once(child, 'exit');
        child.kill('SIGKILL');
        await gone;
      }),
    );
    await rm(dir, { recursive: true, force: true });
  }
  /**
   * One node on two free ports. A port can be taken between freePort and the server's bind (another
   * test picked it too): the server then exits at once, and the node starts again on other ports.
   */
  async function startNode(): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      // The cluster bus would default to port + 10000, which may be taken or past 65535.
      let busPort = await freePort();
      while (busPort === port) busPort = await freePort();
      // biome-ignore format: one flag and its value a line
      const child = spawn('redis-server', [
        '--port', String(port),
        '--cluster-port', String(busPort),
        '--bind', '127.0.0.1',
        '--cluster-enabled', 'yes',
        '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
        '--save', '',
        '--appendonly', 'no',
        '--maxmemory', '64mb',
        '--dir', dir,
      ], { stdio: 'ignore' });
      children.push(child);
      await waitUntil(
        `redis-server on ${port}`,
        async () => exited(child) || (await clusterInfo(port)) !== undefined,
      );
      if (!exited(child)) return port;
      if (attempt === 3) throw new Error(`redis-server on ${port}: exited at start, three times`);
    }
  }
  try {
    const ports: number[] = [];
    for (let i = 0; i < masters; i++) ports.push(await startNode());
    const addresses = ports.map((port) => `127.0.0.1:${port}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes']);
    await waitUntil('cluster_state:ok on every node', async () => {
      const states = await Promise.all(ports.map(clusterInfo));
      return states.every((info) => info?.includes('cluster_state:ok'));
    });
    return { nodes: addresses.join(','), remove };
  } catch (error) {
    await remove();
    throw error;
  }
}
