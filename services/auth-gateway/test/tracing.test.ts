import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { EMAIL_QUEUE } from '@tessera/contracts';
import {
  createTestDatabase,
  createTestRedis,
  jsonClient,
  type OtlpSink,
  type ReceivedSpan,
  type ServiceProcess,
  startGatewayProcess,
  startOtlpSink,
  type TestDatabase,
  type TestRedis,
} from '@tessera/testing';
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENEROUS_LIMITS } from './helpers.ts';

// The gateway as it runs in production (its bundle, `--import @tessera/telemetry/register`), exporting
// its spans to a real OTLP receiver, seen as an SRE reads its traces. APP_ENV=test: the send-code
// answer carries the code.

let database: TestDatabase;
let redis: TestRedis;
let otlp: OtlpSink;
let gateway: ServiceProcess;
let baseUrl: string;

beforeAll(async () => {
  [database, otlp] = await Promise.all([createTestDatabase(), startOtlpSink()]);
  redis = createTestRedis();
  const started = await startGatewayProcess({
    ...GENEROUS_LIMITS,
    APP_ENV: 'test',
    LOG_LEVEL: 'info',
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: redis.keyPrefix,
    BULLMQ_PREFIX: redis.bullmqPrefix,
    JWT_PRIVATE_KEY: generateKeyPairSync('ed25519')
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString(),
    // A refresh token used twice is reuse at once, not a retry within a grace period.
    REFRESH_REUSE_GRACE: '0',
    OTP_SECRET: 'tracing-otp-secret-0123456789abcdef0123456789',
    MAIL_JOB_KEY: `tracing:${randomBytes(32).toString('base64')}`,
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  ({ gateway, url: baseUrl } = started);
  call = jsonClient(baseUrl);
});

afterAll(async () => {
  await gateway?.stop('SIGKILL');
  await Promise.all([otlp?.close(), database?.drop(), redis?.flush()]);
});

let call: ReturnType<typeof jsonClient>;

async function signIn(email: string) {
  const sent = await call('POST', '/api/v1/auth/send-otp-email', { email });
  const verified = await call('POST', '/api/v1/auth/verify-otp-email', { email, code: sent.json.data.code });
  expect(verified.status).toBe(200);
  return verified.json.data as { accessToken: string; refreshToken: string };
}

const STATUS_ERROR = 2;

/** The HTTP server span of the request answered `status` at `route`, once every span of its trace is in. */
async function requestTrace(route: string, status: number) {
  const server = await otlp.waitFor(
    (span) =>
      span.name.endsWith(` ${route}`) &&
      span.attributes['http.route'] === route &&
      span.attributes['http.response.status_code'] === status,
  );
  // @fastify/otel's request span ends before the HTTP span: with it in, the trace is complete.
  await otlp.waitFor((span) => span.traceId === server.traceId && span.name === 'request');
  return { server, spans: otlp.spans.filter((span) => span.traceId === server.traceId) };
}

describe('traces of the gateway', () => {
  it('names each Postgres span by its statement, the same whatever the values or the fields set', async () => {
    const email = 'named@example.com';
    const { accessToken } = await signIn(email);
    const patch = (body: object) => call('PATCH', '/api/v1/users/me', body, accessToken);
    expect((await patch({ name: 'Ada' })).status).toBe(200);
    expect((await patch({ name: 'Ada', surname: 'Lovelace' })).status).toBe(200);

    const { spans: signInSpans } = await requestTrace('/api/v1/auth/verify-otp-email', 200);
    expect(signInSpans.map((span) => span.name)).toContain('WITH users');
    const isPatch = (span: ReceivedSpan) => span.name === 'PATCH /api/v1/users/me';
    await otlp.waitFor((span) => isPatch(span) && otlp.spans.filter(isPatch).length === 2);
    const patches = otlp.spans.filter(isPatch);
    expect(patches).toHaveLength(2);
    const statements = await Promise.all(
      patches.map(async ({ traceId }) => {
        await otlp.waitFor((span) => span.traceId === traceId && span.name === 'request');
        return otlp.spans
          .filter((span) => span.traceId === traceId && span.attributes['db.system.name'] === 'postgresql')
          .filter((span) => span.name !== 'pg-pool.connect')
          .map((span) => span.name);
      }),
    );
    expect(statements[0]).toContain('UPDATE users');
    expect(statements[1]).toEqual(statements[0]);

    const queries = otlp.spans.filter(
      (span) =>
        span.attributes['db.system.name'] === 'postgresql' && span.attributes['db.query.text'] !== undefined,
    );
    expect(queries.length).toBeGreaterThan(0);
    for (const span of queries) {
      expect(span.name).toMatch(/^[A-Z]+( [a-z_]+)?$/);
      expect(span.attributes['db.operation.name']).toBe(span.name.split(' ')[0]);
    }
    expect(JSON.stringify(otlp.spans.map((span) => span.name))).not.toMatch(/pg\.query|named@|Lovelace/);
  });

  it('shows a client error (a 4xx) as no error on any span, and a server error (a 5xx) as one', async () => {
    const email = 'traced@example.com';
    const sent = await call('POST', '/api/v1/auth/send-otp-email', { email });
    const wrong = sent.json.data.code === '0000' ? '1111' : '0000';
    expect((await call('POST', '/api/v1/auth/verify-otp-email', { email, code: wrong })).status).toBe(400);
    const { accessToken, refreshToken } = await signIn('reused@example.com');
    expect((await call('POST', '/api/v1/auth/refresh-token', { refreshToken })).status).toBe(200);
    expect((await call('POST', '/api/v1/auth/refresh-token', { refreshToken })).status).toBe(401);
    // The reuse ended the session.
    expect((await call('GET', '/api/v1/auth/sessions', undefined, accessToken)).status).toBe(401);

    const clientErrors = [
      await requestTrace('/api/v1/auth/verify-otp-email', 400),
      await requestTrace('/api/v1/auth/refresh-token', 401),
      await requestTrace('/api/v1/auth/sessions', 401),
    ];
    for (const { server, spans } of clientErrors) {
      const fastify = spans.filter((span) => span.name === 'request' || span.name.startsWith('handler'));
      expect(fastify.map((span) => span.name)).toContain('request');
      for (const span of spans) {
        const where = `${span.name} of ${server.name} ${server.attributes['http.response.status_code']}`;
        expect(span.status.code, where).not.toBe(STATUS_ERROR);
        expect(
          span.events.map((event) => event.name),
          where,
        ).not.toContain('exception');
      }
    }

    // A table gone from under the gateway: its statement fails, a 500.
    const { accessToken: other } = await signIn('broken@example.com');
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    await admin.query('alter table security_events rename to security_events_away');
    await admin.end();
    expect((await call('GET', '/api/v1/users/me/security-events', undefined, other)).status).toBe(500);
    const { spans } = await requestTrace('/api/v1/users/me/security-events', 500);
    for (const name of ['request', 'handler']) {
      const span = spans.find((candidate) => candidate.name.startsWith(name));
      expect(span, name).toBeDefined();
      const { status, events } = span as ReceivedSpan;
      expect(status.code, name).toBe(STATUS_ERROR);
      expect(events.map((event) => event.name)).toContain('exception');
    }
  });

  it("records a request whatever its caller's sampled flag says, in the caller's trace", async () => {
    // A client asking not to be traced (flag 00) could otherwise keep its requests out of the traces.
    const callerTrace = randomBytes(16).toString('hex');
    const unsampled = jsonClient(baseUrl, {
      traceparent: `00-${callerTrace}-${randomBytes(8).toString('hex')}-00`,
      // Baggage is the caller's to fill: it goes no further than the request (not into the job).
      baggage: 'planted=caller-baggage',
    });
    expect(
      (await unsampled('POST', '/api/v1/auth/send-otp-email', { email: 'unseen@example.com' })).status,
    ).toBe(200);
    await otlp.waitFor(
      (span) => span.traceId === callerTrace && span.name === 'POST /api/v1/auth/send-otp-email',
    );
    await otlp.waitFor((span) => span.traceId === callerTrace && span.name === 'add email.send-otp');
    const queue = new Queue(EMAIL_QUEUE, { connection: { url: redis.url }, prefix: redis.bullmqPrefix });
    try {
      const job = (await queue.getWaiting()).find((waiting) => waiting.data.to === 'unseen@example.com');
      expect(JSON.stringify(job?.opts)).toContain(callerTrace);
      expect(JSON.stringify(job?.opts)).not.toContain('caller-baggage');
    } finally {
      await queue.close();
    }
  });

  it('starts traces for requests only: closing the mail queue at shutdown is none', async () => {
    expect(await gateway.stop('SIGTERM')).toBe(0);
    // The last spans were flushed on the way out.
    const roots = otlp.spans.filter((span) => span.parentSpanId === undefined);
    expect(roots.length).toBeGreaterThan(0);
    for (const root of roots) expect(root.name).toMatch(/^(GET|POST|PATCH|DELETE) \/api\//);
  });
});
