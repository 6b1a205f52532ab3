import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { body, post, startGateway, type TestGateway } from './helpers.ts';

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway();
});
afterAll(() => gateway.close());

describe('health', () => {
  it('is live and ready while Postgres and Redis answer', async () => {
    const live = await gateway.app.inject({ method: 'GET', url: '/health/live' });
    expect(body(live)).toMatchObject({ isSuccess: true, statusCode: 200, data: { status: 'ok' } });
    const ready = await gateway.app.inject({ method: 'GET', url: '/health/ready' });
    expect(body(ready)).toMatchObject({ isSuccess: true, data: { postgres: 'up', redis: 'up' } });
  });
});

describe('when Redis goes away', () => {
  it('is not ready, answers 503 instead of hanging, and recovers when Redis is back', async () => {
    const { redis } = gateway.app;
    redis.disconnect();
    await vi.waitFor(() => expect(redis.status).toBe('end'));
    const ready = await gateway.app.inject({ method: 'GET', url: '/health/ready' });
    expect(ready.statusCode).toBe(503);
    expect(body(ready).errors).toEqual(['Service unavailable', 'redis is down']);
    expect(ready.headers['retry-after']).toBe('5');

    const send = await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'zoe@example.com' });
    expect(send.statusCode).toBe(503);
    expect(body(send)).toMatchObject({ isSuccess: false, data: null, errors: ['Service unavailable'] });
    expect(send.headers['retry-after']).toBe('5');

    await redis.connect();
    expect((await gateway.app.inject({ method: 'GET', url: '/health/ready' })).statusCode).toBe(200);
  });
});

describe('when Postgres goes away during a sign-in', () => {
  it('answers 503 and gives the code back for a retry', async () => {
    // A real outage of this file's database: no new connections, and the open ones cut.
    const url = new URL(gateway.config.database.url);
    const database = url.pathname.slice(1);
    url.pathname = '/postgres';
    const admin = new pg.Client({ connectionString: url.toString() });
    await admin.connect();
    const name = admin.escapeIdentifier(database);
    const email = 'yan@example.com';
    try {
      const { code } = body(await post(gateway.app, '/api/v1/auth/send-otp-email', { email })).data;
      await admin.query(`alter database ${name} allow_connections false`);
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1', [
        database,
      ]);
      const failed = await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code });
      expect(failed.statusCode).toBe(503);
      expect(body(failed).errors).toEqual(['Service unavailable']);
      expect(failed.headers['retry-after']).toBe('5');

      await admin.query(`alter database ${name} allow_connections true`);
      expect((await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code })).statusCode).toBe(
        200,
      );
    } finally {
      await admin.query(`alter database ${name} allow_connections true`).catch(() => undefined);
      await admin.end();
    }
  });
});
