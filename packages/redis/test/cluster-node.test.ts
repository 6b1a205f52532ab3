import { type PrivateRedis, startPrivateRedis } from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeRedis, createRedis, RedisSettingsError, refuseClusterNode } from '../src/index.ts';

// A plain client given one node of a Redis Cluster: refused where other nodes serve some slots, not
// where the node is the master of every slot (a cluster of one shard).

let server: PrivateRedis;
beforeAll(async () => {
  server = await startPrivateRedis(['--cluster-enabled', 'yes']);
});
afterAll(() => server?.remove());

it('refuses a node that serves some of the slots, and takes the master of them all', async () => {
  const client = createRedis({ url: server.url, clusterNodes: '' }, 'operator', () => {});
  await client.connect();
  try {
    // A cluster whose other nodes would serve the rest: this node serves the first half.
    await client.call('CLUSTER', 'ADDSLOTSRANGE', '0', '8191');
    await expect(refuseClusterNode(client)).rejects.toThrow(RedisSettingsError);
    await client.call('CLUSTER', 'ADDSLOTSRANGE', '8192', '16383');
    await expect(refuseClusterNode(client)).resolves.toBeUndefined();
  } finally {
    await closeRedis(client);
  }
});
