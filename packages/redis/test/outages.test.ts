import { type PrivateRedis, startPrivateRedis, waitUntil } from '@tessera/testing';
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
