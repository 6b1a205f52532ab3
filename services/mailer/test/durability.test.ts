import { Writable } from 'node:stream';
import { type PrivateRedis, startPrivateRedis } from '@tessera/testing';
import pino from 'pino';
import { afterAll, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createTransport } from '../src/transport.ts';
import { createMailWorker } from '../src/worker.ts';

// What the mailer says at start about the Redis that holds the queue: each setting that would lose
// queued emails, or nothing when Redis is set up as the README asks.

const servers: PrivateRedis[] = [];
afterAll(() => Promise.all(servers.map((server) => server.remove())));

async function warningsAt(redisArgs: string[]): Promise<Record<string, unknown>[]> {
  const server = await startPrivateRedis(redisArgs);
  servers.push(server);
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    }),
  );
  const config = loadConfig({ APP_ENV: 'test', REDIS_URL: server.url, MAILER_METRICS_PORT: '0' });
  const transport = createTransport(config);
  const mailWorker = createMailWorker({ config, transport, logger });
  try {
    await mailWorker.checkDurability();
  } finally {
    await mailWorker.close();
    transport.close();
  }
  return lines;
}

it('warns at start, naming each setting, when Redis would lose queued emails', async () => {
  const lines = await warningsAt(['--appendonly', 'no', '--maxmemory-policy', 'allkeys-lru']);
  expect(lines).toEqual([
    expect.objectContaining({
      msg: 'Redis may lose queued emails on a restart or when full; see README, Operations',
      problems: ['appendonly=no, want yes', 'maxmemory-policy=allkeys-lru, want noeviction'],
    }),
  ]);
});

it('says nothing when Redis keeps its data as the README asks', async () => {
  const lines = await warningsAt([
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--maxmemory-policy',
    'noeviction',
  ]);
  expect(lines).toEqual([]);
});
