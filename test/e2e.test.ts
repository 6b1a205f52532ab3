import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EMAIL_QUEUE } from '@tessera/contracts';
import {
  createTestDatabase,
  createTestRedis,
  type Json,
  jsonClient,
  mentionsCode,
  type OtlpSink,
  type ReceivedSpan,
  type ServiceProcess,
  type SmtpSink,
  startGatewayProcess,
  startOtlpSink,
  startService,
  startSmtpSink,
  type TestDatabase,
  type TestRedis,
  waitUntil,
} from '@tessera/testing';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The whole product as an operator runs it: the gateway and the mailer as their own processes in
// production mode, a real queue between them and a real SMTP server at the end.

let database: TestDatabase;
let redis: TestRedis;
let sink: SmtpSink;
let traces: OtlpSink;
let baseUrl: string;
let opsUrl: string;
let compileCache: string;
const processes: ServiceProcess[] = [];

/** What both services wrote so far. */
const logs = () => processes.map((service) => service.output()).join('');

let call: ReturnType<typeof jsonClient>;

beforeAll(async () => {
  [database, sink, traces] = await Promise.all([createTestDatabase(), startSmtpSink(), startOtlpSink()]);
  redis = createTestRedis();
  // As `pnpm start` and the image run them, each with a compile cache of its own, empty here.
  compileCache = await mkdtemp(path.join(tmpdir(), 'tessera-compile-cache-'));
  const shared = {
    APP_ENV: 'production',
    LOG_LEVEL: 'info',
    REDIS_URL: redis.url,
    BULLMQ_PREFIX: redis.bullmqPrefix,
    MAIL_JOB_KEY: `e2e:${randomBytes(32).toString('base64')}`,
    // Traces go to an OTLP receiver in this test, exported quickly.
    OTEL_EXPORTER_OTLP_ENDPOINT: traces.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    // Exported every 2 s: the last spans before a SIGTERM only arrive if the shutdown flushes them.
    OTEL_BSP_SCHEDULE_DELAY: '2000',
    // A drain held open past it exits 1, within the test's timeout.
    SHUTDOWN_TIMEOUT: '10',
  };
  const mailer = startService('mailer', {
    ...shared,
    NODE_COMPILE_CACHE: path.join(compileCache, 'mailer'),
    SMTP_URL: sink.url,
    MAIL_FROM: 'Tessera <no-reply@tessera.test>',
    MAILER_METRICS_PORT: '0',
  });
  processes.push(mailer);
  const started = await startGatewayProcess({
    ...shared,
    NODE_COMPILE_CACHE: path.join(compileCache, 'gateway'),
    // The arrival of each request too (the SIGTERM test waits for it); production runs at info.
    LOG_LEVEL: 'debug',
    DATABASE_URL: database.url,
    REDIS_KEY_PREFIX: redis.keyPrefix,
    JWT_PRIVATE_KEY: generateKeyPairSync('ed25519')
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString(),
    OTP_SECRET: 'e2e-otp-secret-0123456789abcdef0123456789',
    // The same person signs in on two devices without waiting out the resend cooldown.
    OTP_RESEND_COOLDOWN: '0',
  });
  ({ url: baseUrl, opsUrl } = started);
  call = jsonClient(baseUrl, { 'user-agent': 'e2e-client' });
  processes.unshift(started.gateway);
});

afterAll(async () => {
  await Promise.all(processes.map((service) => service.stop('SIGKILL')));
  await Promise.all([sink?.close(), traces?.close(), database?.drop(), redis?.flush()]);
  if (compileCache) await rm(compileCache, { recursive: true, force: true });
});

/** Requests a code and reads it from the email, as a person would. */
async function signInByEmail(email: string) {
  const sent = await call('POST', '/api/v1/auth/send-otp-email', { email });
  expect(sent.status).toBe(200);
  expect(sent.json.data).not.toHaveProperty('code');
  const mail = await sink.waitFor((m) => m.to.includes(email) && !usedSubjects.has(m.subject));
  usedSubjects.add(mail.subject);
  // Production never sends a code over a connection that STARTTLS did not upgrade.
  expect(mail.tls).toBe(true);
  const code = /\b(\d{4})\b/.exec(mail.subject)?.[1] ?? '';
  expect(mail.text).toContain(code);
  expect(mail.html).toContain(code);
  const verified = await call('POST', '/api/v1/auth/verify-otp-email', { email, code });
  expect(verified.status).toBe(200);
  return { code, ...verified.json.data };
}
const usedSubjects = new Set<string>();

describe('the whole sign-in flow, end to end', () => {
  it('code by email → sign in → refresh → sessions → revoke → logout, with no secret in any log', async () => {
    const email = 'newcomer@example.com';
    const laptop = await signInByEmail(email);
    const phone = await signInByEmail(email);
    expect(phone.user._id).toBe(laptop.user._id);
    expect(laptop.isRegistrationComplete).toBe(false);

    const refreshed = await call('POST', '/api/v1/auth/refresh-token', { refreshToken: laptop.refreshToken });
    expect(refreshed.status).toBe(200);
    const laptopTokens = refreshed.json.data;

    const listed = await call(
      'GET',
      '/api/v1/auth/sessions?page=1&limit=10',
      undefined,
      laptopTokens.accessToken,
    );
    expect(listed.status).toBe(200);
    expect(listed.json.data.pagination).toMatchObject({ totalItems: 2, totalPages: 1, currentPage: 1 });
    expect(listed.json.data.list.filter((s: { current: boolean }) => s.current)).toHaveLength(1);
    expect(listed.json.data.list[0]).toMatchObject({ ipAddress: '127.0.0.1', userAgent: 'e2e-client' });

    const revoked = await call(
      'POST',
      '/api/v1/auth/revoke-token',
      { refreshToken: phone.refreshToken },
      laptopTokens.accessToken,
    );
    expect(revoked.status).toBe(200);
    expect((await call('GET', '/api/v1/auth/sessions', undefined, phone.accessToken)).status).toBe(401);

    const logout = await call('POST', '/api/v1/auth/logout', {}, laptopTokens.accessToken);
    expect(logout.json.data).toEqual({ revokedSessions: 1 });
    expect((await call('GET', '/api/v1/auth/sessions', undefined, laptopTokens.accessToken)).status).toBe(
      401,
    );

    const jwks = (await fetch(`${baseUrl}/.well-known/jwks.json`).then((r) => r.json())) as Json;
    expect(jwks.keys).toHaveLength(1);

    // Metrics only on the operations port; the public port does not know the route.
    const metrics = await fetch(`${opsUrl}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/^tessera_sessions_ended_total\{reason="logout"\} 1$/m);
    expect((await call('GET', '/metrics')).status).toBe(404);

    const secrets = [laptop.accessToken, laptop.refreshToken, phone.refreshToken, laptopTokens.refreshToken];
    const output = logs();
    expect(output).toContain('send-otp done');
    for (const secret of secrets) expect(output).not.toContain(secret);
    // Request and job ids are UUIDs: a 4-digit group of one is not the code.
    for (const { code } of [laptop, phone]) expect(mentionsCode(output, code)).toBe(false);
  });

  it('follows one code from the request through the queue and the mailer to SMTP in one trace', async () => {
    const email = 'traced@example.com';
    const { code, accessToken, refreshToken } = await signInByEmail(email);

    const request = await traces.waitFor(
      (span) => span.name === 'POST /api/v1/auth/send-otp-email' && span.service === 'tessera-auth-gateway',
    );
    const trace = (name: string) =>
      traces.waitFor((span) => span.traceId === request.traceId && span.name === name);
    const smtp = await trace('smtp send');
    expect(smtp.service).toBe('tessera-mailer');
    // smtp send ← the mailer's job span ← the gateway's enqueue span ← … ← the HTTP request span.
    const byId = (id: string | undefined) => traces.spans.find((span) => span.spanId === id);
    const ancestry: ReceivedSpan[] = [];
    for (let span = byId(smtp.parentSpanId); span; span = byId(span.parentSpanId)) ancestry.push(span);
    expect(ancestry.map((span) => span.service)).toContain('tessera-mailer');
    expect(ancestry.find((span) => span.service === 'tessera-auth-gateway')?.name).toBe('add email.send-otp');
    expect(ancestry.at(-1)?.spanId).toBe(request.spanId);
    expect(request.attributes['http.route']).toBe('/api/v1/auth/send-otp-email');
    // Redis and Postgres show inside the requests that used them (the code's scripts, the sign-in's
    // statement): the bundles leave ioredis and pg for the instrumentation to patch.
    const signIn = await traces.waitFor((span) => span.name === 'POST /api/v1/auth/verify-otp-email');
    const database = (traceId: string, system: string) =>
      traces.waitFor((span) => span.traceId === traceId && span.attributes['db.system.name'] === system);
    await database(request.traceId, 'redis');
    await database(signIn.traceId, 'postgresql');

    // No span holds the code, a token, the address, or what a client put in a query string.
    await call('POST', '/api/v1/auth/send-otp-email?email=query-leak%40example.com', {
      email: 'q@example.com',
    });
    await traces.waitFor((span) => span.attributes['url.query'] === 'redacted');
    const exported = traces.bodies.join('');
    expect(exported).not.toContain('query-leak');
    for (const secret of [email, accessToken, refreshToken]) expect(exported).not.toContain(secret);
    expect(mentionsCode(exported, code)).toBe(false);
  });

  // Writing it is what frees the copy Node otherwise keeps in memory until the process exits.
  it('each service writes its compile cache once started, not only at exit', async () => {
    await waitUntil('the mailer ready', () => logs().includes('mailer ready'));
    for (const service of ['gateway', 'mailer']) {
      const files = await readdir(path.join(compileCache, service), { recursive: true });
      // One file per module the service loaded, in a folder named by Node's version: hundreds.
      expect(files.length, service).toBeGreaterThan(100);
    }
  });

  it('serves every metric the alerting rules name (infra/prometheus/alerts.yaml)', async () => {
    await waitUntil('the mailer ready', () => logs().includes('mailer ready'));
    const started = logs()
      .split('\n')
      .find((line) => line.includes('mailer started'));
    const mailerOps = /"operations":"(http:[^"]+)"/.exec(started ?? '')?.[1];
    expect(mailerOps).toBeDefined();
    const scrapes = [opsUrl, mailerOps].map((url) => fetch(`${url}/metrics`).then((r) => r.text()));
    const served = (await Promise.all(scrapes)).join('\n');
    const rules = await readFile(new URL('../infra/prometheus/alerts.yaml', import.meta.url), 'utf8');
    const named = new Set(rules.match(/\b(?:tessera|process|nodejs|v8js|bullmq)_[a-z0-9_]+/g));
    expect(named.size).toBeGreaterThan(10);
    expect([...named].filter((name) => !new RegExp(`^${name}[{ ]`, 'm').test(served))).toEqual([]);
  });

  it('on repeated SIGTERMs the gateway finishes the request in flight, answers later ones 503, and both exit 0', async () => {
    // A keep-alive client whose request body is still arriving when the signals come, with a second
    // request pipelined behind it: that one arrives while the gateway drains. A second client sends
    // nothing after its answer: its connection goes idle during the drain, and the gateway closes it.
    const body = JSON.stringify({ email: 'last-one@example.com' });
    const head = (path: string, length: number) =>
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${length}\r\nUser-Agent: last-client\r\n\r\n`;
    const until = async (seen: () => boolean) => {
      while (!seen()) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    const count = (text: string) => logs().split(text).length;
    const received = count('"incoming request"');
    const client = () => {
      const socket = net.connect(Number(new URL(baseUrl).port), '127.0.0.1');
      const answers = { text: '', closed: once(socket, 'close') };
      socket.on('data', (chunk: Buffer) => {
        answers.text += chunk.toString();
      });
      socket.write(head('/api/v1/auth/send-otp-email', Buffer.byteLength(body)) + body.slice(0, 10));
      return { socket, answers };
    };
    const [pipelining, quiet] = [client(), client()];
    await until(() => count('"incoming request"') > received + 1);

    const exits = processes.map(async ({ child }) => (await once(child, 'exit'))[0]);
    for (const { child } of processes) child.kill('SIGTERM');
    await until(() => count('closing: finishing the work in flight') > 1);
    // The orchestrator stops sending traffic: the operations port says it is not ready while it drains.
    expect((await fetch(`${opsUrl}/health/ready`)).status).toBe(503);
    for (const { child } of processes) child.kill('SIGTERM');
    pipelining.socket.write(
      body.slice(10) + head('/api/v1/auth/send-otp-email', Buffer.byteLength(body)) + body,
    );
    quiet.socket.write(body.slice(10));
    await pipelining.answers.closed;

    const [first, second] = pipelining.answers.text.split(/(?=HTTP\/1\.1 )/);
    expect(first).toMatch(/^HTTP\/1\.1 200 /);
    expect(second).toMatch(/^HTTP\/1\.1 503 /);
    expect(second).toMatch(/\r\nretry-after: 5\r\n/i);
    expect(second).toMatch(/\r\nconnection: close\r\n/i);
    // With the headers of every answer.
    expect(second).toMatch(/\r\ncontent-security-policy: default-src 'none';frame-ancestors 'none'\r\n/i);
    expect(second).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
    expect(second).toMatch(/\r\nstrict-transport-security: /i);
    expect(JSON.parse(second?.slice(second.indexOf('\r\n\r\n')) ?? '')).toMatchObject({
      isSuccess: false,
      statusCode: 503,
      errors: ['Service unavailable', 'This instance is shutting down; try again'],
    });

    // Exit 1 would be a drain held open by the idle connection until its deadline.
    expect(await Promise.all(exits)).toEqual([0, 0]);
    await quiet.answers.closed;
    expect(quiet.answers.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(quiet.answers.text).not.toMatch(/\r\nconnection: close\r\n/i);
    expect(logs()).toContain('already closing');
    // Its spans were flushed on the way out, not left in the 2 s export buffer.
    expect(traces.spans.some((span) => span.attributes['user_agent.original'] === 'last-client')).toBe(true);
  });
});

describe('without an OTLP endpoint', () => {
  it('still puts the trace context in log lines and queued jobs', async () => {
    const prefix = `${redis.bullmqPrefix}-quiet`;
    const { gateway, url } = await startGatewayProcess({
      APP_ENV: 'production',
      LOG_LEVEL: 'info',
      DATABASE_URL: database.url,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: redis.keyPrefix,
      // A queue no mailer reads, so the job stays for inspection.
      BULLMQ_PREFIX: prefix,
      JWT_PRIVATE_KEY: generateKeyPairSync('ed25519')
        .privateKey.export({ type: 'pkcs8', format: 'pem' })
        .toString(),
      OTP_SECRET: 'e2e-otp-secret-0123456789abcdef0123456789',
      MAIL_JOB_KEY: `e2e:${randomBytes(32).toString('base64')}`,
    });
    processes.push(gateway);
    const lines: Json[] = [];
    gateway.child.stdout?.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
    });

    const sent = await fetch(`${url}/api/v1/auth/send-otp-email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'quiet@example.com' }),
    });
    expect(sent.status).toBe(200);

    // A caller with a trace of its own, whose body arrives in a later packet than the headers.
    const callerTrace = randomBytes(16).toString('hex');
    const body = JSON.stringify({ email: 'caller@example.com' });
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      `POST /api/v1/auth/send-otp-email HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n` +
        `traceparent: 00-${callerTrace}-${randomBytes(8).toString('hex')}-01\r\n` +
        // Baggage is the caller's to fill: it goes no further than the request.
        `baggage: planted=caller-baggage\r\n\r\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.write(body);
    const [answer] = await once(socket, 'data');
    expect(String(answer)).toMatch(/^HTTP\/1\.1 200 /);
    expect(await gateway.stop('SIGTERM')).toBe(0);
    // Its last line says the drain ended, as the mailer's does.
    expect(lines.at(-1)?.msg).toBe('closed');

    const completed = lines.filter((line) => line.msg === 'request completed' && line.req?.method === 'POST');
    const [ownTrace, continued] = completed.map((line) => line.trace_id);
    expect(ownTrace).toMatch(/^[0-9a-f]{32}$/);
    expect(ownTrace).not.toBe(callerTrace);
    expect(continued).toBe(callerTrace);
    const queue = new Queue(EMAIL_QUEUE, { connection: { url: redis.url }, prefix });
    try {
      const jobs = await queue.getWaiting();
      const traceOf = (email: string) => JSON.stringify(jobs.find((job) => job.data.to === email)?.opts);
      expect(traceOf('quiet@example.com')).toContain(ownTrace);
      expect(traceOf('caller@example.com')).toContain(callerTrace);
      expect(traceOf('caller@example.com')).not.toContain('caller-baggage');
    } finally {
      await queue.close();
    }
  });
});
