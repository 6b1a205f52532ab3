import { generateKeyPairSync } from 'node:crypto';
import { SEND_OTP_JOB } from '@tessera/contracts';
import { type OperationsServer, startOperationsServer } from '@tessera/telemetry';
import { createSigner } from 'fast-jwt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ageRotations,
  bearer,
  body,
  manualClock,
  post,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

// Metrics are process-wide: this file runs one gateway, and reads counters as differences.
const clock = manualClock();
let gateway: TestGateway;
let operations: OperationsServer;
beforeAll(async () => {
  gateway = await startGateway({}, { clock });
  // The operations port as server.ts starts it, on a free port.
  operations = await startOperationsServer({
    host: '127.0.0.1',
    port: 0,
    checks: gateway.app.readiness,
  });
});
afterAll(async () => {
  await operations.close();
  await gateway.close();
});

async function scrape(): Promise<string> {
  const response = await fetch(`${operations.url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
  return response.text();
}

describe('the operations port', () => {
  it('serves /metrics and the probes; the public port answers /metrics with the 404 envelope', async () => {
    const ready = await fetch(`${operations.url}/health/ready`);
    expect(await ready.json()).toMatchObject({ statusCode: 200, data: { postgres: 'up', redis: 'up' } });
    const publicMetrics = await gateway.app.inject({ url: '/metrics' });
    expect(publicMetrics.statusCode).toBe(404);
    expect(body(publicMetrics)).toMatchObject({
      isSuccess: false,
      errors: ['Resource not found', 'No route GET /metrics'],
    });
  });
});

/** The value of one series, 0 when it has not appeared yet. */
function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1).split(' ')[0]) : 0;
}

describe('GET /metrics', () => {
  it('counts codes, verifications, refreshes and ended sessions by result', async () => {
    const before = await scrape();
    const { refreshToken, code } = await signIn(gateway.app, 'metrics@example.com');
    await post(gateway.app, '/api/v1/auth/verify-otp-email', { email: 'metrics@example.com', code });
    const rotated = await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken });
    await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken });
    await ageRotations(gateway, gateway.config.sessions.refreshReuseGrace + 1);
    await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken });
    await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: 'x'.repeat(43) });
    expect(rotated.statusCode).toBe(200);
    const after = await scrape();

    const delta = (series: string) => value(after, series) - value(before, series);
    expect(delta('tessera_codes_sent_total')).toBe(1);
    expect(delta('tessera_verifications_total{result="ok"}')).toBe(1);
    expect(delta('tessera_verifications_total{result="expired"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="ok"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="grace"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="reuse"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="invalid"}')).toBe(1);
    expect(delta('tessera_sessions_ended_total{reason="refresh_token_reuse"}')).toBe(1);
  });

  it('counts refused access tokens by why: a forger shows as signature, key or lifetime', async () => {
    const { accessToken } = await signIn(gateway.app, 'refused@example.com');
    const [header = '', payload = ''] = accessToken.split('.');
    const { kid } = JSON.parse(Buffer.from(header, 'base64url').toString());
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const signed = createSigner({ key: gateway.config.jwt.privateKey, algorithm: 'EdDSA', kid });
    const stranger = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' });
    const refusals = {
      malformed: 'not-a-token',
      key: createSigner({ key: stranger.toString(), algorithm: 'EdDSA', kid: 'unknown' })(claims),
      signature: `${accessToken.slice(0, -4)}AAAA`,
      lifetime: signed({ ...claims, exp: claims.iat + 10 * 365 * 86_400 }),
      claims: signed({ ...claims, sub: 'user-42' }),
    };
    const before = await scrape();
    for (const token of Object.values(refusals)) {
      const answer = await gateway.app.inject({ url: '/api/v1/users/me', headers: bearer(token) });
      expect(answer.statusCode).toBe(401);
    }
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);
    await gateway.app.inject({ url: '/api/v1/users/me', headers: bearer(accessToken) });
    const after = await scrape();

    for (const reason of [...Object.keys(refusals), 'expired']) {
      const series = `tessera_access_tokens_refused_total{reason="${reason}"}`;
      expect(value(after, series) - value(before, series), reason).toBe(1);
    }
  });

  it('records request durations by route template and status, never by raw URL', async () => {
    const { accessToken } = await signIn(gateway.app, 'durations@example.com');
    const sessionId = '00000000-0000-4000-8000-000000000000';
    await gateway.app.inject({
      method: 'DELETE',
      url: `/api/v1/auth/sessions/${sessionId}`,
      headers: { authorization: `Bearer ${accessToken}` },
    });
    const text = await scrape();
    expect(text).toMatch(
      /tessera_http_request_duration_seconds_count\{[^}]*http_route="\/api\/v1\/auth\/sessions\/:id"[^}]*http_response_status_code="404"[^}]*\} 1/,
    );
    expect(text).toMatch(
      /tessera_http_request_duration_seconds_bucket\{[^}]*http_route="\/api\/v1\/auth\/send-otp-email"/,
    );
    expect(text).not.toContain(sessionId);
  });

  it("shows the process's own: event-loop delay and utilization, V8's heap and its collections", async () => {
    const text = await scrape();
    expect(value(text, 'nodejs_eventloop_delay_p99')).toBeGreaterThan(0);
    expect(text).toMatch(/^nodejs_eventloop_utilization \d/m);
    expect(text).toMatch(/^v8js_memory_heap_used\{v8js_heap_space_name="old_space"\} \d+/m);
    expect(text).toMatch(/^v8js_gc_duration_count\{/m);
    // As Prometheus's clients name them: memory, CPU time and start, for limits and restarts.
    expect(value(text, 'process_resident_memory_bytes')).toBeGreaterThan(10_000_000);
    expect(value(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    const started = value(text, 'process_start_time_seconds');
    expect(Math.abs(started - (Date.now() / 1000 - process.uptime()))).toBeLessThan(5);
  });

  it('counts the 503s of an outage by which dependency, each at 0 from the start', async () => {
    const ofRedis = 'tessera_errors_total{code="DEPENDENCY_UNAVAILABLE",dependency="redis"}';
    const ofPostgres = 'tessera_errors_total{code="DEPENDENCY_UNAVAILABLE",dependency="postgres"}';
    const before = await scrape();
    expect(before).toContain(`${ofPostgres} `);
    expect(before).toContain(`${ofRedis} `);
    expect(before).toContain('tessera_errors_total{code="INTERNAL"} ');

    const { redis } = gateway.app;
    redis.disconnect();
    try {
      const send = await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'outage@example.com' });
      expect(send.headers['tessera-error-code']).toBe('DEPENDENCY_UNAVAILABLE');
      const after = await scrape();
      expect(value(after, ofRedis)).toBe(value(before, ofRedis) + 1);
      expect(value(after, ofPostgres)).toBe(value(before, ofPostgres));
    } finally {
      await redis.connect();
    }
  });

  it('shows the Postgres pool: connections in use and idle, and requests waiting for one', async () => {
    const { accessToken } = await signIn(gateway.app, 'pool-gauge@example.com');
    await gateway.app.inject({ url: '/api/v1/users/me', headers: bearer(accessToken) });
    const text = await scrape();
    expect(value(text, 'tessera_db_pool_connections{state="idle"}')).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/^tessera_db_pool_connections\{state="used"\} 0$/m);
    expect(text).toMatch(/^tessera_db_pool_connections\{state="waited_for"\} 0$/m);
  });

  it('counts the email jobs waiting in the queue it fills, which no mailer empties here', async () => {
    const before = value(await scrape(), 'tessera_email_queue_jobs{state="waiting"}');
    const sent = await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'queued@example.com' });
    expect(sent.statusCode).toBe(200);
    expect(value(await scrape(), 'tessera_email_queue_jobs{state="waiting"}')).toBe(before + 1);
  });

  const oldest = async () =>
    Number(/^tessera_email_queue_oldest_waiting_seconds (\S+)$/m.exec(await scrape())?.[1]);

  it('tells how long the oldest email has waited in that queue, so that one no mailer empties shows', async () => {
    await gateway.app.mailQueue.drain();
    expect(await oldest()).toBe(0);
    // A code sent 90 s ago, not taken since; and one just sent behind it.
    await gateway.app.mailQueue.add(SEND_OTP_JOB, {}, { timestamp: Date.now() - 90_000 });
    const sent = await post(gateway.app, '/api/v1/auth/send-otp-email', { email: 'waiting@example.com' });
    expect(sent.statusCode).toBe(200);
    const age = await oldest();
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThan(120);
    await gateway.app.mailQueue.drain();
    expect(await oldest()).toBe(0);
  });

  it("tells the age of a job whose data cannot be read, and keeps the counts when the age can't be read", async () => {
    const queue = gateway.app.mailQueue;
    await queue.drain();
    const job = await queue.add(SEND_OTP_JOB, {}, { timestamp: Date.now() - 90_000 });
    const key = queue.toKey(job.id ?? '');
    // Written by hand, or by another producer: the age is the job's, whatever its data.
    await gateway.app.mailQueueRedis.hset(key, 'data', '{not json');
    expect(await oldest()).toBeGreaterThanOrEqual(90);
    // No job hash at all where one should be: the age is unknown, the counts are not.
    await gateway.app.mailQueueRedis.del(key);
    await gateway.app.mailQueueRedis.set(key, 'not a job');
    const text = await scrape();
    expect(text).toMatch(/^tessera_email_queue_oldest_waiting_seconds NaN$/m);
    expect(text).toMatch(/^tessera_email_queue_jobs\{state="waiting"\} 1$/m);
    await gateway.app.mailQueueRedis.del(key);
    await queue.drain();
  });
});
