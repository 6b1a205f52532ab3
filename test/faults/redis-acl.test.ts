import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import {
  createTestDatabase,
  type PrivateRedis,
  type RedisCluster,
  type SmtpSink,
  startPrivateRedis,
  startRedisCluster,
  startSmtpSink,
  type TestDatabase,
  waitUntil,
} from '@tessera/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTessera, type Tessera } from './tessera.ts';

// Redis with users of its own (README, Operations: Least privilege): the ACL the README gives serves
// both services, on one server and on a cluster; a user without a command BullMQ needs stops the
// mailer, saying why, rather than spinning on the refusal until its memory runs out.

let sink: SmtpSink;
let database: TestDatabase;
let rules: { gateway: string[]; mailer: string[] };
beforeAll(async () => {
  [sink, database] = await Promise.all([startSmtpSink(), createTestDatabase()]);
  // The README's line, as an operator copies it.
  const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
  const line = (user: string) =>
    new RegExp(`^ *user ${user} on >PASSWORD (.+)$`, 'm').exec(readme)?.[1]?.split(' ') ?? [];
  rules = { gateway: line('tessera-gateway'), mailer: line('tessera-mailer') };
  expect(rules.gateway).toContain('+info');
  expect(rules.mailer).toContain('+info');
});
afterAll(() => Promise.all([sink?.close(), database?.drop()]));

/** Adds `user` (password `secret-<user>`) with `words` to the Redis server at host:port. */
const addUser = (node: string, user: string, words: string[]) => {
  const [host = '', port = ''] = node.split(':');
  return promisify(execFile)('redis-cli', [
    '-h',
    host,
    '-p',
    port,
    'ACL',
    'SETUSER',
    user,
    'on',
    `>secret-${user}`,
    ...words,
  ]);
};
const as = (node: string, user: string) => `redis://${user}:secret-${user}@${node}`;
const signsIn = async (tessera: Tessera, email: string) => {
  const code = await tessera.codeByEmail(email);
  return (await tessera.call('POST', '/api/v1/auth/verify-otp-email', { email, code })).status;
};

describe('on one Redis server', () => {
  let redis: PrivateRedis;
  let tessera: Tessera;
  let node: string;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    node = new URL(redis.url).host;
    await addUser(node, 'tessera-gateway', rules.gateway);
    await addUser(node, 'tessera-mailer', rules.mailer);
    await addUser(node, 'noinfo', [...rules.gateway, '-info']);
    tessera = await startTessera({ databaseUrl: database.url, redisUrl: as(node, 'tessera-gateway'), sink });
  });
  afterAll(async () => {
    await tessera?.stop();
    await redis?.remove();
  });

  it('signs in, with the code emailed, as the users the README gives', async () => {
    tessera.startMailer({ REDIS_URL: as(node, 'tessera-mailer') });
    expect(await signsIn(tessera, 'acl@example.com')).toBe(200);
  });

  it("keeps the mailer's user away from the gateway's keys", async () => {
    // A code's failures, as a mailer's password would reset them.
    const answer = await promisify(execFile)('redis-cli', [
      '-u',
      as(node, 'tessera-mailer'),
      'SET',
      'tessera:{email:x}:failures',
      '0',
    ]);
    expect(answer.stdout).toMatch(/^NOPERM/);
  });

  it('stops the gateway at start with one line when its user lacks a command it needs', async () => {
    await expect(
      startTessera({ databaseUrl: database.url, redisUrl: as(node, 'noinfo'), sink }),
    ).rejects.toThrow(
      "Tessera gateway failed to start: NOPERM this user has no permissions to run the 'info' command",
    );
  });

  it('stops the mailer with one line when its user lacks a command it needs', async () => {
    const refused = tessera.startMailer({ REDIS_URL: as(node, 'noinfo') });
    const [code] = (await once(refused.child, 'exit')) as [number | null];
    await waitUntil('its last line read', () => refused.output().includes('stopping'));
    expect(code).toBe(1);
    expect(refused.output()).toContain(
      'Redis refuses the mailer a command or key it needs (its ACL): stopping (README, Operations: Least privilege)',
    );
    expect(refused.output()).not.toContain('mailer ready');
  });
});

describe('on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let tessera: Tessera;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    const nodes = cluster.nodes.split(',');
    // An ACL is each node's own.
    for (const node of nodes) {
      await addUser(node, 'tessera-gateway', rules.gateway);
      await addUser(node, 'tessera-mailer', rules.mailer);
    }
    tessera = await startTessera(
      { databaseUrl: database.url, redisUrl: as(nodes[0] ?? '', 'tessera-gateway'), sink },
      { REDIS_CLUSTER_NODES: cluster.nodes },
    );
  });
  afterAll(async () => {
    await tessera?.stop();
    await cluster?.remove();
  });

  it('signs in, with the code emailed, as the users the README gives', async () => {
    tessera.startMailer({ REDIS_URL: as(cluster.nodes.split(',')[0] ?? '', 'tessera-mailer') });
    expect(await signsIn(tessera, 'acl-cluster@example.com')).toBe(200);
  });
});
