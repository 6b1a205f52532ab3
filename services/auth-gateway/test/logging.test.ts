import { Writable } from 'node:stream';
import { DependencyUnavailableError } from '@tessera/contracts';
import { mentionsCode } from '@tessera/testing';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, body, post, signIn, startGateway, type TestGateway } from './helpers.ts';

// Everything the gateway logs, at the most talkative level, as the JSON lines it writes.
const lines: string[] = [];
const stream = new Writable({
  write(chunk, _encoding, done) {
    lines.push(chunk.toString());
    done();
  },
});

const PINO_NUMBERS = new Set(['pid', 'time', 'responseTime']);

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
    // Request ids are UUIDs: a 4-digit group of one is not the code. pino's own numbers (the process
    // id, the time, a duration) may equal it by chance, and are left out.
    const logged = output
      .split('\n')
      .filter(Boolean)
      .map((line) =>
        JSON.stringify(JSON.parse(line), (key, value) => (PINO_NUMBERS.has(key) ? undefined : value)),
      );
    expect(mentionsCode(logged.join('\n'), first.code)).toBe(false);
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

  it('leave out the Redis command of a failure an outage wraps, whose arguments may hold an address', () => {
    lines.length = 0;
    const refused = Object.assign(new Error('NOPERM'), {
      command: { name: 'evalsha', args: ['ana@example.com'] },
    });
    gateway.app.log.warn(
      { err: new DependencyUnavailableError('redis', { cause: refused }) },
      'redis unavailable',
    );
    const output = lines.join('');
    expect(output).toContain('NOPERM');
    expect(output).not.toContain('ana@example.com');
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

      // A URL refused before routing has its line too, under the id its answer gave.
      const malformed = await quiet.app.inject({ url: '/api/v1/users/%E0%A4%A' });
      expect(malformed.statusCode).toBe(400);
      const refused = infoLines
        .map((text) => JSON.parse(text))
        .filter((entry) => entry.reqId === malformed.headers['x-request-id']);
      expect(refused).toMatchObject([{ level: 30, msg: 'request completed', res: { statusCode: 400 } }]);
    } finally {
      await quiet.close();
    }
  });

  it('tell a Redis outage in one short line per failed request, without a stack', async () => {
    const { redis } = gateway.app;
    redis.disconnect();
    await vi.waitFor(() => expect(redis.status).toBe('end'), { timeout: 5000 });
    lines.length = 0;
    try {
      for (let i = 0; i < 3; i++)
        expect(
          (await post(gateway.app, '/api/v1/auth/send-otp-email', { email: `out-${i}@example.com` }))
            .statusCode,
        ).toBe(503);
      const warnings = lines
        .map((text) => JSON.parse(text))
        .filter((entry) => entry.msg === 'redis unavailable');
      expect(warnings).toHaveLength(3);
      for (const warning of warnings) {
        expect(warning).toMatchObject({ level: 40, reason: expect.stringMatching(/\S/) });
        expect(JSON.stringify(warning)).not.toContain('    at ');
      }
    } finally {
      await redis.connect();
    }
  });

  it('do not quote the values of a row that Postgres refused', async () => {
    const email = 'private.person@example.com';
    await sql`alter table users add constraint no_boom check (signup_campaign is distinct from 'boom')`.execute(
      gateway.app.db,
    );
    try {
      lines.length = 0;
      const { code } = body(await post(gateway.app, '/api/v1/auth/send-otp-email', { email })).data;
      const failed = await post(gateway.app, '/api/v1/auth/verify-otp-email', {
        email,
        code,
        signupCampaign: 'boom',
      });
      expect(failed.statusCode).toBe(500);
      const output = lines.join('');
      // The error is logged, by its code and constraint, with no value of the row.
      expect(output).toContain('"code":"23514"');
      expect(output).toContain('no_boom');
      expect(output).not.toContain(email);
    } finally {
      await sql`alter table users drop constraint no_boom`.execute(gateway.app.db);
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
