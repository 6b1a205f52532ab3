import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import {
  EMAIL_JOB_OPTIONS,
  EMAIL_QUEUE,
  parseMailJobKeys,
  SEND_OTP_JOB,
  type SendOtpJobData,
  sealCode,
  sendOtpJobId,
} from '@tessera/contracts';
import {
  createTestRedis,
  mentionsCode,
  type OtlpSink,
  type SmtpSink,
  startOtlpSink,
  startSmtpSink,
  type TestRedis,
} from '@tessera/testing';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';

// The mailer started as in production (`--import @tessera/telemetry/register`), exporting its spans to a
// real OTLP receiver.
const MAIL_JOB_KEY = `test:${randomBytes(32).toString('base64')}`;
const keys = parseMailJobKeys(MAIL_JOB_KEY);
const mailerDir = fileURLToPath(new URL('..', import.meta.url));
let redis: TestRedis;
let sink: SmtpSink;
let otlp: OtlpSink;
let queue: Queue<SendOtpJobData>;
let child: ChildProcess;
const output: string[] = [];

beforeAll(async () => {
  redis = createTestRedis();
  [sink, otlp] = await Promise.all([startSmtpSink(), startOtlpSink()]);
  queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
  });
  child = spawn(process.execPath, ['--import', '@tessera/telemetry/register', 'src/main.ts'], {
    cwd: mailerDir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      APP_ENV: 'production',
      REDIS_URL: redis.url,
      BULLMQ_PREFIX: redis.bullmqPrefix,
      SMTP_URL: sink.url,
      MAIL_FROM: 'Tessera <no-reply@tessera.test>',
      MAIL_JOB_KEY,
      MAILER_METRICS_PORT: '0',
      // BullMQ's stalled-job check, many times over while the test runs.
      MAILER_STALLED_INTERVAL_MS: '100',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
});

afterAll(async () => {
  if (child.exitCode === null) {
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
  await queue?.close();
  await Promise.all([sink?.close(), otlp?.close(), redis?.flush()]);
});

it('traces a job: the SMTP send is a child of the job span, names the recipient masked, and logs join the trace', async () => {
  const expiresAt = new Date(Date.now() + 300_000).toISOString();
  const delivered = sendOtpJobId('00000000-0000-4000-8000-000000000001');
  const rejected = sendOtpJobId('00000000-0000-4000-8000-000000000002');
  await queue.add(
    SEND_OTP_JOB,
    { to: 'alice@example.com', sealedCode: sealCode('4826', 'alice@example.com', keys), expiresAt },
    { ...EMAIL_JOB_OPTIONS, jobId: delivered },
  );
  await sink.waitFor((mail) => mail.to.includes('alice@example.com'));
  sink.failNext(1, 550);
  await queue.add(
    SEND_OTP_JOB,
    { to: 'bob@example.com', sealedCode: sealCode('5937', 'bob@example.com', keys), expiresAt },
    { ...EMAIL_JOB_OPTIONS, jobId: rejected },
  );

  const job = await otlp.waitFor(
    (span) => span.name === 'process email' && span.attributes['bullmq.job.id'] === delivered,
  );
  const send = await otlp.waitFor((span) => span.name === 'smtp send' && span.traceId === job.traceId);
  expect(send).toMatchObject({
    service: 'tessera-mailer',
    parentSpanId: job.spanId,
    attributes: { 'email.to.masked': 'a***@example.com', 'smtp.delivery': 'smtp' },
  });
  const failedJob = await otlp.waitFor(
    (span) => span.name === 'process email' && span.attributes['bullmq.job.id'] === rejected,
  );
  const failedSend = await otlp.waitFor(
    (span) => span.name === 'smtp send' && span.parentSpanId === failedJob.spanId,
  );
  // The failed attempt is an error of the job's span too, not of its SMTP send only.
  expect(job.status.code).not.toBe(STATUS_ERROR);
  expect(failedJob.status).toMatchObject({
    code: STATUS_ERROR,
    message: expect.stringMatching(/550/),
  });
  // The send's exception, addresses masked: its stack's package paths are none (pnpm's `nodemailer@…/`).
  const [exception] = failedSend.events.filter((event) => event.name === 'exception');
  const stack = String(exception?.attributes['exception.stacktrace']);
  expect(stack).toMatch(/\/nodemailer@\d+\.\d+\.\d+/);
  expect(stack).not.toMatch(/\/\*\*\*@/);

  const logs = output
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
  expect(logs).toContainEqual(
    expect.objectContaining({ msg: 'send-otp done', jobId: delivered, trace_id: job.traceId }),
  );
  expect(logs).toContainEqual(
    expect.objectContaining({ msg: 'send-otp failed', jobId: rejected, trace_id: failedJob.traceId }),
  );

  const exported = JSON.stringify(otlp.spans);
  for (const code of ['4826', '5937']) expect(mentionsCode(exported, code), `code ${code}`).toBe(false);
  expect(exported).not.toMatch(/(alice|bob)@/);
});

it("starts traces for jobs only: BullMQ's upkeep (stalled-job checks, closing) makes none", async () => {
  // The spans still buffered are flushed on the way out.
  child.kill('SIGTERM');
  expect((await once(child, 'exit'))[0]).toBe(0);
  const jobTraces = new Set(
    otlp.spans.filter((span) => span.name === 'process email').map((span) => span.traceId),
  );
  expect(jobTraces.size).toBeGreaterThan(0);
  const outside = otlp.spans.filter((span) => !jobTraces.has(span.traceId)).map((span) => span.name);
  expect(outside).toEqual([]);
});

const STATUS_ERROR = 2;
