import { Writable } from 'node:stream';
import { DURABLE_REDIS_ARGS, type PrivateRedis, startPrivateRedis } from '@tessera/testing';
import pino from 'pino';
import { afterAll, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createTransport } from '../src/transport.ts';
import { createMailWorker } from '../src/worker.ts';

// What the mailer says at start about the Redis that holds the queue: each setting that would lose
// queued emails, or nothing when Redis is set up as the README asks.

const servers: PrivateRedis[] = [];
afterAll(() => Promise.all(servers.map((server) => server.remove())));

async function warningsAt(
  redisArgs: string[],
  { startedLater = false } = {},
): Promise<Record<string, unknown>[]> {
  const server = await startPrivateRedis(redisArgs);
  servers.push(server);
  if (startedLater) await server.stop();
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
    const checked = mailWorker.checkRedis();
    if (startedLater) {
      // The mailer started before Redis: the check waits for it instead of failing (or exiting).
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(warnings(lines)).toEqual([]);
      await server.start();
    }
    await checked;
  } finally {
    await mailWorker.close();
    transport.close();
  }
  return warnings(lines);
}

/** The durability warnings among what the mailer logged (the worker also logs Redis's absence). */
const warnings = (lines: Record<string, unknown>[]) =>
  lines.filter((line) => String(line.msg).startsWith('Redis may lose queued emails'));

it('warns at start, naming each setting, when Redis would lose queued emails', async () => {
  const lines = await warningsAt(['--appendonly', 'no', '--maxmemory-policy', 'allkeys-lru']);
  expect(lines).toEqual([
    expect.objectContaining({
      msg: 'Redis may lose queued emails on a restart or when full; see README, Operations',
      problems: [
        'appendonly=no, want yes',
        'maxmemory-policy=allkeys-lru, want noeviction',
        'maxmemory=0, want a limit below the memory Redis may use',
      ],
    }),
  ]);
});

it('says nothing when Redis keeps its data as the README asks', async () => {
  const lines = await warningsAt(DURABLE_REDIS_ARGS);
  expect(lines).toEqual([]);
});

it('checks once Redis comes, when the mailer starts before it', async () => {
  const lines = await warningsAt(['--appendonly', 'no', '--maxmemory', '64mb'], { startedLater: true });
  expect(lines).toEqual([expect.objectContaining({ problems: ['appendonly=no, want yes'] })]);
});
