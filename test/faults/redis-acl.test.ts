import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  createTestDatabase,
  freePort,
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
import { parseAllDocuments } from 'yaml';
import { startTessera, type Tessera } from './tessera.ts';

// Redis with users of its own (README, Operations: Least privilege): the ACL the README gives serves
// both services, on one server and on a cluster; a user without a command BullMQ needs stops the
// mailer, saying why, rather than spinning on the refusal until its memory runs out; and Redis as
// infra/k8s runs it, with the same users.

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

  it("shows an address's limits and newest code email, and a client IP's limits, to an operator with the gateway's user", async () => {
    const email = 'acl-cluster@example.com';
    const shown = await tessera.command(['src/limits-cli.ts', 'show', '--email', email, '--json']);
    expect(shown).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(shown.stdout)).toMatchObject({
      email,
      // Used to sign in.
      code: null,
      inbox: { held: 1 },
      codeEmail: { state: 'accepted' },
    });
    // The client's own limits, the general one too: its keys are in other slots than the address's.
    const ip = await tessera.command(['src/limits-cli.ts', 'show', '--ip', '127.0.0.1', '--json']);
    expect(ip).toMatchObject({ code: 0, stderr: '' });
    const { sends, requests } = JSON.parse(ip.stdout);
    expect(sends.held).toBe(1);
    // Its send and its sign-in at least.
    expect(requests.held).toBeGreaterThanOrEqual(2);
  });
});

// infra/k8s, read as Kubernetes reads it: a container's command, its variables (secrets and
// `$(NAME)` expanded) and its probe.
interface Container {
  name: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { key: string } } }[];
  readinessProbe?: { exec?: { command: string[] } };
}
// biome-ignore lint/suspicious/noExplicitAny: manifests of several kinds
const manifests = async (file: string): Promise<any[]> =>
  parseAllDocuments(await readFile(new URL(`../../infra/k8s/${file}`, import.meta.url), 'utf8')).map(
    (document) => document.toJS(),
  );
const container = async (file: string, name: string): Promise<Container> => {
  const containers: Container[] = (await manifests(file)).flatMap(
    (manifest) => manifest.spec?.template?.spec?.containers ?? [],
  );
  const found = containers.find((each) => each.name === name);
  if (!found) throw new Error(`no container ${name} in ${file}`);
  return found;
};
const environment = (of: Container, secret: Record<string, string>) => {
  const env: Record<string, string> = {};
  for (const variable of of.env ?? []) {
    const key = variable.valueFrom?.secretKeyRef?.key;
    env[variable.name] =
      key === undefined
        ? (variable.value ?? '').replace(/\$\((\w+)\)/g, (_, name: string) => env[name] ?? '')
        : (secret[key] ?? '');
  }
  return env;
};

describe('as infra/k8s runs Redis', () => {
  let secret: Record<string, string>;
  let dir: string;
  let port: number;
  let redis: ChildProcess;
  let redisEnv: Record<string, string>;
  let urls: { gateway: string; mailer: string };
  let mailerEnv: Record<string, string>;
  let tessera: Tessera;
  beforeAll(async () => {
    // The passwords the Secret's example names, as its comment makes them.
    const [example] = await manifests('secret.example.yaml');
    secret = Object.fromEntries(
      Object.keys(example.stringData)
        .filter((key) => key.startsWith('REDIS_'))
        .map((key) => [key, randomBytes(32).toString('hex')]),
    );
    const server = await container('redis.yaml', 'redis');
    redisEnv = environment(server, secret);
    // The StatefulSet's command, with its two mounts in a folder of the test's own.
    [dir, port] = await Promise.all([mkdtemp(path.join(tmpdir(), 'tessera-k8s-redis-')), freePort()]);
    const script = server.args?.[0] ?? '';
    expect(script).toContain('/run/redis/');
    expect(script).toContain('--dir /data');
    const [shell = '', ...options] = server.command ?? [];
    redis = spawn(
      shell,
      [
        ...options,
        `${script.replaceAll('/run/redis/', `${dir}/`).replace('--dir /data', `--dir ${dir}`)} --port ${port} --bind 127.0.0.1`,
      ],
      { env: { PATH: process.env.PATH ?? '', ...redisEnv }, stdio: 'ignore' },
    );
    const [cli = '', ...probe] = server.readinessProbe?.exec?.command ?? [];
    await waitUntil('Redis answering its probe', async () => {
      const answer = promisify(execFile)(cli, ['-p', String(port), ...probe], { env: redisEnv });
      return (await answer.catch(() => ({ stdout: '' }))).stdout.trim() === 'PONG';
    });

    // Each service's URL, as its Deployment builds it, pointed at this server.
    const at = (url: string | undefined) => {
      const parsed = new URL(url ?? '');
      parsed.host = `127.0.0.1:${port}`;
      return parsed.toString();
    };
    mailerEnv = environment(await container('mailer.yaml', 'mailer'), secret);
    urls = {
      gateway: at(environment(await container('gateway.yaml', 'gateway'), secret).REDIS_URL),
      mailer: at(mailerEnv.REDIS_URL),
    };
    const [config] = await manifests('config.yaml');
    tessera = await startTessera({
      databaseUrl: database.url,
      redisUrl: urls.gateway,
      bullmqPrefix: config.data.BULLMQ_PREFIX,
      sink,
    });
  });
  afterAll(async () => {
    await tessera?.stop();
    redis?.kill('SIGKILL');
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("gives both users the README's commands", () => {
    expect(redisEnv.COMMANDS?.split(/\s+/)).toEqual(rules.gateway.filter((word) => !word.startsWith('~')));
    expect(redisEnv.COMMANDS?.split(/\s+/)).toEqual(rules.mailer.filter((word) => !word.startsWith('~')));
  });

  it('signs in, with the code emailed, as the users its Deployments name', async () => {
    tessera.startMailer({ REDIS_URL: urls.mailer });
    expect(await signsIn(tessera, 'k8s@example.com')).toBe(200);
  });

  it('lets no one in without a user, and keeps the mailer away from the gateway keys', async () => {
    const cli = (...args: string[]) => promisify(execFile)('redis-cli', args);
    expect((await cli('-p', String(port), 'PING')).stdout).toMatch(/^NOAUTH/);
    expect((await cli('-u', urls.mailer, 'SET', 'tessera:{email:x}:failures', '0')).stdout).toMatch(
      /^NOPERM/,
    );
    // No password in the process listing.
    const listing = await readFile(`/proc/${redis.pid}/cmdline`, 'utf8');
    for (const password of Object.values(secret)) expect(listing).not.toContain(password);
  });

  it("lets KEDA read the queue's length as the mailer", async () => {
    const [scaledObject] = (await manifests('mailer.yaml')).filter((each) => each.kind === 'ScaledObject');
    const trigger = scaledObject.spec.triggers[0].metadata;
    const answer = await promisify(execFile)(
      'redis-cli',
      ['-p', String(port), '--user', mailerEnv[trigger.usernameFromEnv] ?? '', 'LLEN', trigger.listName],
      { env: { REDISCLI_AUTH: mailerEnv[trigger.passwordFromEnv] ?? '' } },
    );
    expect(answer.stdout.trim()).toMatch(/^\d+$/);
  });
});
