import { Writable } from 'node:stream';
import { mentionsCode } from '@tessera/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, body, post, signIn, startGateway, type TestGateway } from './helpers.ts';

// Everything the gateway logs, at the most talkative level, as the JSON lines it writes.
const lines: string[] = [];
const stream = new Writable({
  write(chunk, _encoding, done) {
    lines.push(chunk.toString());
    done();
  },
});

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway({ LOG_LEVEL: 'trace' }, { logStream: stream });
});
afterAll(() => gateway.close());

describe('logs', () => {
  it('never hold a code, a token or an Authorization header through a whole flow', async () => {
    const first = await signIn(gateway.app, 'logan@example.com', { 'user-agent': 'log-test' });
    const refreshed = body(
      await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: first.refreshToken }),
    ).data;
    await gateway.app.inject({
      method: 'GET',
      url: '/api/v1/auth/sessions',
      headers: bearer(refreshed.accessToken),
    });
    await post(gateway.app, '/api/v1/auth/logout', {}, bearer(refreshed.accessToken));
    await gateway.app.inject({
      method: 'GET',
      url: '/api/v1/auth/sessions',
      headers: bearer(refreshed.accessToken),
    });

    const output = lines.join('');
    expect(output).toContain('request completed');
    for (const secret of [
      first.accessToken,
      first.refreshToken,
      refreshed.accessToken,
      refreshed.refreshToken,
    ]) {
      expect(output).not.toContain(secret);
    }
    expect(output.toLowerCase()).not.toContain('bearer ');
    // Request ids are UUIDs: a 4-digit group of one is not the code.
    expect(mentionsCode(output, first.code)).toBe(false);
  });

  it('do not carry the job data of a failed enqueue, which holds the code', async () => {
    // A key of the wrong type where BullMQ keeps the queue's metadata makes every enqueue fail.
    const metaKey = `${gateway.config.mail.queuePrefix}:email:meta`;
    const redis = new Redis(gateway.config.redis.url);
    await redis.set(metaKey, 'not-a-hash');
    try {
      lines.length = 0;
      const response = await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'leak@example.com' });
      expect(response.statusCode).toBe(500);
      const output = lines.join('');
      expect(output).toContain('unhandled error');
      expect(output).not.toMatch(/code\\?"\s*:\s*\\?"\d{4}/);
      expect(output).not.toContain('leak@example.com');
    } finally {
      await redis.del(metaKey);
      await redis.quit();
    }
  });

  it('at info, one line per request: method, path without the query, status and time', async () => {
    const infoLines: string[] = [];
    const quiet = await startGateway(
      { LOG_LEVEL: 'info' },
      {
        logStream: new Writable({
          write(chunk, _encoding, done) {
            infoLines.push(...chunk.toString().split('\n').filter(Boolean));
            done();
          },
        }),
      },
    );
    try {
      const response = await quiet.app.inject({ url: '/api/v1/auth/sessions?secret=x' });
      expect(response.statusCode).toBe(401);
      const mine = infoLines
        .map((line) => JSON.parse(line))
        .filter((line) => line.reqId === response.headers['x-request-id']);
      expect(mine).toHaveLength(1);
      expect(mine[0]).toMatchObject({
        level: 30,
        msg: 'request completed',
        req: { method: 'GET', url: '/api/v1/auth/sessions' },
        res: { statusCode: 401 },
      });
      expect(mine[0].responseTime).toBeGreaterThanOrEqual(0);

      // A path as long as a request may carry is logged by its first 200 characters.
      const long = await quiet.app.inject({ url: `/api/v1/${'a'.repeat(15_000)}` });
      const [line] = infoLines.filter((text) => text.includes(String(long.headers['x-request-id'])));
      expect(JSON.parse(line ?? '{}').req.url).toBe(`/api/v1/${'a'.repeat(192)}…`);
      expect(line?.length).toBeLessThan(1_000);
    } finally {
      await quiet.close();
    }
  });

  it("warn at start when the gateway's clock is not the Redis server's", async () => {
    const startLines: string[] = [];
    const output = new Writable({
      write(chunk, _encoding, done) {
        startLines.push(chunk.toString());
        done();
      },
    });
    const skewed = await startGateway(
      { LOG_LEVEL: 'info' },
      { logStream: output, clock: { now: () => new Date(Date.now() + 20_000) } },
    );
    await skewed.close();
    const warning = startLines
      .map((line) => JSON.parse(line))
      .find((entry) => entry.level === 40 && entry.msg.startsWith("This host's clock"));
    expect(warning?.msg).toMatch(
      /^This host's clock is [\d.]+ s ahead of the Redis server's: keep every host's/,
    );
    expect(warning?.clockOffsetMs).toBeGreaterThan(19_000);
    expect(warning?.clockOffsetMs).toBeLessThan(21_000);
    // The machine's own clock is the Redis server's here: no such warning.
    expect(lines.join('')).not.toContain("This host's clock");
  });
});
