import { type PrivateRedis, startPrivateRedis, startTcpProxy, waitUntil } from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeRedis, createRedis, isConnectionError, reportOutages } from '../src/index.ts';

let server: PrivateRedis;
beforeAll(async () => {
  server = await startPrivateRedis();
});
afterAll(() => server.remove());

it('tells an outage once, its reconnection attempts at debug, and its end', async () => {
  const told: { level: string; message: string }[] = [];
  const log = {
    warn: (_fields: object, message: string) => told.push({ level: 'warn', message }),
    info: (message: string) => told.push({ level: 'info', message }),
    debug: (_fields: object, message: string) => told.push({ level: 'debug', message }),
  };
  const client = createRedis({ url: server.url, clusterNodes: '' }, 'commands', () => {});
  reportOutages(client, log, 'Redis');
  await client.connect();
  try {
    await server.stop();
    // Several attempts to reconnect fail while it is away.
    await waitUntil('three failed attempts', () => told.length >= 3);
    await server.start();
    await waitUntil('the connection back', () => told.some(({ level }) => level === 'info'));

    const levels = told.map(({ level }) => level);
    expect(levels[0]).toBe('warn');
    expect(levels.slice(1, -1).every((level) => level === 'debug')).toBe(true);
    expect(told.at(-1)).toEqual({ level: 'info', message: 'Redis connection is back' });
    expect(told[0]?.message).toBe('Redis connection error');
    expect(await client.ping()).toBe('PONG');
  } finally {
    await closeRedis(client);
  }
});

it("tells a connection's errors from a command's", async () => {
  const errors: Error[] = [];
  const client = createRedis({ url: server.url, clusterNodes: '' }, 'commands', (err) => errors.push(err));
  await client.connect();
  try {
    // The server's answer to a command is the command's, and so is a bug's error.
    const refused = await client.call('NO-SUCH-COMMAND').catch((error: Error) => error);
    expect(refused).toBeInstanceOf(Error);
    expect(isConnectionError(refused as Error)).toBe(false);
    expect(isConnectionError(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBe(
      false,
    );
    // A full Redis refuses writes on a connection that stays up: its OOM must not pass for an outage's.
    await client.config('SET', 'maxmemory', '1');
    const full = await client.set('outages:full', 'x').catch((error: Error) => error);
    expect((full as Error).message).toMatch(/unavailable/);
    expect(isConnectionError(full as Error)).toBe(false);
    await client.config('SET', 'maxmemory', '0');

    await server.stop();
    await waitUntil('the connection refused', () => errors.length > 0);
    expect(errors.every(isConnectionError)).toBe(true);
    const unanswered = await client.ping().catch((error: Error) => error);
    expect(isConnectionError(unanswered as Error)).toBe(true);
  } finally {
    await server.start();
    await closeRedis(client);
  }
});

it('replaces a connection lost without a word, once commands went unanswered twice, and tells it once', async () => {
  // A NAT or firewall that forgets the connection: nothing arrives on it, neither side is told, and
  // a new connection works at once.
  const proxy = await startTcpProxy(server.url);
  const told: string[] = [];
  const log = {
    warn: (fields: object, message: string) =>
      told.push(`${message}: ${(fields as { err?: Error }).err?.message}`),
    info: (message: string) => told.push(message),
    debug: () => {},
  };
  const client = createRedis({ url: proxy.through(server.url), clusterNodes: '' }, 'commands', () => {});
  reportOutages(client, log, 'Redis');
  await client.connect();
  try {
    await client.set('outages:lost', 'kept');
    proxy.abandon();
    // A command unanswered for 2 s may be a slow one: the connection stays...
    const first = await client.get('outages:lost').catch((error: Error) => error);
    expect(isConnectionError(first as Error)).toBe(true);
    expect(told).toEqual([]);
    // ...and once the next goes unanswered too, nothing heard in between, it is replaced, and the
    // next command goes over a new connection: not in 15 minutes, when the kernel gives up.
    const second = await client.get('outages:lost').catch((error: Error) => error);
    expect(isConnectionError(second as Error)).toBe(true);
    await waitUntil(
      'a new connection',
      async () => (await client.get('outages:lost').catch(() => null)) === 'kept',
    );
    expect(told).toEqual([
      'Redis connection error: no answer to commands for 4 s: connecting again',
      'Redis connection is back',
    ]);
  } finally {
    await closeRedis(client);
    await proxy.close();
  }
});

it('keeps a connection whose server was slow to answer once (a long script, a fork), and delivers what waited', async () => {
  const errors: Error[] = [];
  const client = createRedis({ url: server.url, clusterNodes: '' }, 'commands', (err) => errors.push(err));
  const other = createRedis({ url: server.url, clusterNodes: '' }, 'commands', () => {});
  await Promise.all([client.connect(), other.connect()]);
  try {
    await client.set('outages:slow', '0');
    // Redis busy for 3 s (a script that loops): the first command times out at 2 s, those after it
    // are answered at 3 s.
    const busy = `local function ms() local t = redis.call('TIME') return t[1] * 1000 + t[2] / 1000 end
      local until_ = ms() + 3000 while ms() < until_ do end return 1`;
    void other.eval(busy, 0).catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 100));
    const first = client.incr('outages:slow').catch((error: Error) => error);
    await new Promise((resolve) => setTimeout(resolve, 1_950));
    const later = client.incr('outages:slow');
    expect(isConnectionError((await first) as Error)).toBe(true);
    expect(await later).toBe(2);
    expect(errors).toEqual([]);
  } finally {
    await closeRedis(client);
    await closeRedis(other);
  }
});
