import {
  EMAIL_JOB_OPTIONS,
  EMAIL_QUEUE,
  parseMailJobKeys,
  SEND_OTP_JOB,
  type SendOtpJobData,
  sealCode,
  sendOtpJobId,
} from '@tessera/contracts';
import { type OperationsServer, startOperationsServer } from '@tessera/telemetry';
import { createTestRedis, type SmtpSink, startSmtpSink, type TestRedis } from '@tessera/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createTransport, type MailTransport } from '../src/transport.ts';
import { createMailWorker } from '../src/worker.ts';

// The operations server as main.ts wires it, in-process: a real worker, Redis and SMTP server.
let redis: TestRedis;
let sink: SmtpSink;
let transport: MailTransport;
let mailWorker: ReturnType<typeof createMailWorker>;
let operations: OperationsServer;
let queue: Queue<SendOtpJobData>;

beforeAll(async () => {
  redis = createTestRedis();
  sink = await startSmtpSink();
  const config = loadConfig({
    APP_ENV: 'test',
    REDIS_URL: redis.url,
    BULLMQ_PREFIX: redis.bullmqPrefix,
    SMTP_URL: sink.url,
    MAILER_METRICS_PORT: '0',
    MAILER_METRICS_HOST: '127.0.0.1',
  });
  transport = createTransport(config);
  mailWorker = createMailWorker({ config, transport, logger: pino({ level: 'silent' }) });
  operations = await startOperationsServer({
    host: config.ops.host,
    port: config.ops.port,
    checks: { redis: mailWorker.ping, smtp: transport.verify },
  });
  queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
  });
});

afterAll(async () => {
  await operations?.close();
  await mailWorker?.close();
  transport?.close();
  await queue?.close();
  await sink?.close();
  await redis?.flush();
});

/** A code email's job data as the gateway queues it, valid for 5 minutes. */
const codeEmail = (to: string, code: string): SendOtpJobData => ({
  to,
  sealedCode: sealCode(code, to, parseMailJobKeys()),
  expiresAt: new Date(Date.now() + 300_000).toISOString(),
});

async function get(path: string, base = operations.url) {
  const response = await fetch(`${base}${path}`);
  return { status: response.status, type: response.headers.get('content-type'), body: await response.text() };
}

describe('GET /metrics', () => {
  it('counts a sent email and reports the queue by state, in Prometheus text', async () => {
    const delivered = sink.waitFor((mail) => mail.to.includes('ivan@example.com'));
    await queue.add(SEND_OTP_JOB, codeEmail('ivan@example.com', '4826'), {
      ...EMAIL_JOB_OPTIONS,
      jobId: sendOtpJobId('00000000-0000-4000-8000-000000000001'),
    });
    await delivered;
    // The counter is added to right after the send, and the job completes right after that; the
    // worker may not have got there yet.
    const metrics = await vi.waitFor(
      async () => {
        const answer = await get('/metrics');
        expect(answer.body).toContain('tessera_emails_total{outcome="sent"} 1');
        expect(answer.body).toContain('tessera_email_queue_jobs{state="active"} 0');
        return answer;
      },
      { timeout: 10_000 },
    );

    expect(metrics.status).toBe(200);
    expect(metrics.type).toContain('text/plain');
    expect(metrics.body).toContain('# TYPE tessera_emails_total counter');
    expect(metrics.body).toMatch(/^tessera_emails_total\{outcome="sent"\} 1$/m);
    expect(metrics.body).toMatch(/^tessera_emails_total\{outcome="failed"\} 0$/m);
    expect(metrics.body).toMatch(/^tessera_emails_total\{outcome="expired"\} 0$/m);
    expect(metrics.body).toContain('# TYPE tessera_email_queue_jobs gauge');
    for (const state of ['waiting', 'active', 'delayed', 'failed'])
      expect(metrics.body).toMatch(new RegExp(`^tessera_email_queue_jobs\\{state="${state}"\\} 0$`, 'm'));
    // Neither the code nor the address is in a name or a label. A sample's value is left out: it is a
    // number (a heap size, a duration) that may hold the code's four digits by chance.
    const names = metrics.body.replace(/ -?[\d.]+(?:e[+-]?\d+)?$/gm, '');
    expect(names).toContain('tessera_emails_total{outcome="sent"}');
    expect(names).not.toContain('4826');
    expect(metrics.body).not.toContain('ivan@');
  });

  it('samples the queue at each scrape: how many wait, and how long the oldest has waited', async () => {
    const oldest = async () =>
      Number(/^tessera_email_queue_oldest_waiting_seconds (\S+)$/m.exec((await get('/metrics')).body)?.[1]);
    expect(await oldest()).toBe(0);
    const delivered = sink.waitFor((mail) => mail.to.includes('judy@example.com'));
    await mailWorker.worker.pause();
    try {
      const data = codeEmail('judy@example.com', '5937');
      // Queued 90 s ago, by a gateway's clock, and waiting since.
      await queue.add(SEND_OTP_JOB, data, {
        ...EMAIL_JOB_OPTIONS,
        jobId: sendOtpJobId('00000000-0000-4000-8000-000000000002'),
        timestamp: Date.now() - 90_000,
      });
      expect((await get('/metrics')).body).toMatch(/^tessera_email_queue_jobs\{state="waiting"\} 1$/m);
      expect(await oldest()).toBeGreaterThanOrEqual(90);
      expect(await oldest()).toBeLessThan(120);
    } finally {
      await mailWorker.worker.resume();
    }
    await delivered;
    expect(await oldest()).toBe(0);
  });
});

describe('health', () => {
  it('is live, and ready while Redis and the SMTP server answer', async () => {
    const live = await get('/health/live');
    expect(live).toMatchObject({ status: 200, type: 'application/json; charset=utf-8' });
    expect(JSON.parse(live.body)).toMatchObject({ isSuccess: true, statusCode: 200, data: { status: 'ok' } });

    const ready = await get('/health/ready');
    expect(ready).toMatchObject({ status: 200, type: 'application/json; charset=utf-8' });
    expect(JSON.parse(ready.body)).toEqual({
      isSuccess: true,
      statusCode: 200,
      data: { redis: 'up', smtp: 'up' },
      errors: [],
      timestamp: expect.any(String),
    });
  });

  it('answers unknown paths with an enveloped 404, its canonical message first', async () => {
    const missing = await get('/nope');
    expect(missing).toMatchObject({ status: 404, type: 'application/json; charset=utf-8' });
    expect(JSON.parse(missing.body)).toMatchObject({
      isSuccess: false,
      statusCode: 404,
      data: null,
      errors: ['Resource not found', 'No route GET /nope'],
    });
  });

  it('answers another method than GET with an enveloped 405 that says which one to use', async () => {
    const response = await fetch(`${operations.url}/metrics`, { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET');
    expect(await response.json()).toMatchObject({
      isSuccess: false,
      statusCode: 405,
      errors: ['Method not allowed', 'Use GET, not POST'],
    });
  });

  it('is not ready while Redis does not answer', async () => {
    // Nothing listens on port 1.
    const unreachable = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, lazyConnect: true });
    const server = await startOperationsServer({
      host: '127.0.0.1',
      port: 0,
      checks: { redis: () => unreachable.ping() },
    });
    try {
      const ready = await get('/health/ready', server.url);
      expect(ready).toMatchObject({ status: 503, type: 'application/json; charset=utf-8' });
      expect(JSON.parse(ready.body)).toEqual({
        isSuccess: false,
        statusCode: 503,
        data: null,
        errors: ['Service unavailable', 'redis is down'],
        timestamp: expect.any(String),
      });
    } finally {
      await server.close();
      unreachable.disconnect();
    }
  });

  it('is not ready once the service drains, while Redis answers, and still live', async () => {
    const server = await startOperationsServer({
      host: '127.0.0.1',
      port: 0,
      checks: { redis: mailWorker.ping },
    });
    try {
      expect((await get('/health/ready', server.url)).status).toBe(200);
      server.drain();
      const ready = await get('/health/ready', server.url);
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body)).toMatchObject({ errors: ['Service unavailable', 'shutting down'] });
      expect((await get('/health/live', server.url)).status).toBe(200);
    } finally {
      await server.close();
    }
  });

  // Last: it stops this file's SMTP server.
  it('is not ready once the SMTP server is gone and a send failed, says why, and is still live', async () => {
    // This file's last email was accepted within the minute: that vouches for the server, which a
    // new connection may not (a server that limits connections per client).
    expect((await get('/health/ready')).status).toBe(200);
    await sink.close();
    await queue.add(SEND_OTP_JOB, codeEmail('kate@example.com', '6382'), {
      ...EMAIL_JOB_OPTIONS,
      jobId: sendOtpJobId('00000000-0000-4000-8000-000000000003'),
    });
    await expect.poll(async () => (await get('/health/ready')).status, { timeout: 5000 }).toBe(503);
    const ready = await get('/health/ready');
    expect(ready.type).toBe('application/json; charset=utf-8');
    expect(JSON.parse(ready.body)).toMatchObject({
      isSuccess: false,
      statusCode: 503,
      errors: [
        'Service unavailable',
        expect.stringMatching(/^smtp is down: connect ECONNREFUSED 127\.0\.0\.1:\d+$/),
      ],
    });
    expect((await get('/health/live')).status).toBe(200);
  });
});
