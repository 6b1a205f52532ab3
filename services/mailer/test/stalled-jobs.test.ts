import {
  EMAIL_JOB_OPTIONS,
  EMAIL_QUEUE,
  REDACTED_CODE,
  SEND_OTP_JOB,
  type SendOtpJobData,
  sealCode,
  sendOtpJobId,
} from '@tessera/contracts';
import { createTestRedis, type SmtpSink, startSmtpSink, type TestRedis } from '@tessera/testing';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig, type MailerConfig } from '../src/config.ts';
import { createTransport, type MailTransport } from '../src/transport.ts';
import { createMailWorker } from '../src/worker.ts';

// Two mailers with a 4 s lock that look for stalled jobs four times a second: a slow send stays with
// the mailer sending it, and a job BullMQ gives up on after it stalled too often keeps no code. (The
// lock is renewed every half of it: a test process held up for longer, 2 s, would lose its job.)
const LOCK_MS = 4000;
const SMTP_DELAY_MS = 2 * LOCK_MS;

let redis: TestRedis;
let sink: SmtpSink;
let transport: MailTransport;
let queue: Queue<SendOtpJobData>;
let inspector: Redis;
let config: MailerConfig;
const mailers: Array<ReturnType<typeof createMailWorker>> = [];

beforeAll(async () => {
  redis = createTestRedis();
  sink = await startSmtpSink({ delayMs: SMTP_DELAY_MS });
  config = loadConfig({
    APP_ENV: 'test',
    REDIS_URL: redis.url,
    BULLMQ_PREFIX: redis.bullmqPrefix,
    SMTP_URL: sink.url,
    MAILER_LOCK_DURATION_MS: String(LOCK_MS),
    MAILER_STALLED_INTERVAL_MS: '250',
  });
  transport = createTransport(config);
  for (let i = 0; i < 2; i++)
    mailers.push(createMailWorker({ config, transport, logger: pino({ level: 'silent' }) }));
  queue = new Queue(EMAIL_QUEUE, { connection: { url: redis.url }, prefix: redis.bullmqPrefix });
  inspector = new Redis(redis.url);
});

afterAll(async () => {
  await Promise.all(mailers.map((mailer) => mailer.close()));
  transport?.close();
  await queue?.close();
  await inspector?.quit();
  await sink?.close();
  await redis?.flush();
});

const codeEmail = (to: string, code: string): SendOtpJobData => ({
  to,
  sealedCode: sealCode(code, to, config.mailJobKeys),
  expiresAt: new Date(Date.now() + 300_000).toISOString(),
});

it('keeps a send slower than the lock with its mailer: delivered once, never taken as stalled', async () => {
  const stalled: string[] = [];
  for (const { worker } of mailers) worker.on('stalled', (jobId) => stalled.push(jobId));
  const completed = Promise.race(
    mailers.map(({ worker }) => new Promise((resolve) => worker.once('completed', resolve))),
  );
  await queue.add(SEND_OTP_JOB, codeEmail('slow@example.com', '4826'), {
    ...EMAIL_JOB_OPTIONS,
    jobId: sendOtpJobId('00000000-0000-4000-8000-000000000001'),
  });

  await completed;
  // A takeover happens at a stalled check, which emits `stalled`: wait for one that ran after the
  // completion (BullMQ keeps the time of the last in this key), so none is still to come.
  const completedAt = Date.now();
  const lastCheck = async () =>
    Number(await inspector.get(`${redis.bullmqPrefix}:${EMAIL_QUEUE}:stalled-check`));
  while ((await lastCheck()) <= completedAt) await new Promise((resolve) => setTimeout(resolve, 25));
  expect(sink.messages.map((mail) => mail.subject)).toEqual(['4826 is your Tessera sign-in code']);
  expect(stalled).toEqual([]);
}, 20_000);

it('redacts the code of a job failed for stalling too often, which no mailer processed', async () => {
  const jobId = sendOtpJobId('00000000-0000-4000-8000-000000000002');
  // A worker that takes the job and dies with it, as a mailer killed mid-send, after the job had
  // already stalled as often as the mailer allows (as often as it may be attempted: its deadline
  // ends it first, unless mailers die holding it this often).
  await Promise.all(mailers.map(({ worker }) => worker.pause()));
  const dying = new Worker(EMAIL_QUEUE, null, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
    lockDuration: LOCK_MS,
  });
  try {
    await queue.add(SEND_OTP_JOB, codeEmail('stuck@example.com', '5937'), { ...EMAIL_JOB_OPTIONS, jobId });
    await inspector.hset(`${redis.bullmqPrefix}:${EMAIL_QUEUE}:${jobId}`, 'stc', EMAIL_JOB_OPTIONS.attempts);
    expect((await dying.getNextJob('dying-token'))?.id).toBe(jobId);
    await Promise.all(mailers.map(({ worker }) => worker.resume()));

    for (let i = 0; i < 400 && (await queue.getJob(jobId))?.data.sealedCode !== REDACTED_CODE; i++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    const job = await queue.getJob(jobId);
    expect(job?.failedReason).toBe('job stalled more than allowable limit');
    expect(job?.data.sealedCode).toBe(REDACTED_CODE);
    expect(sink.messages.filter((mail) => mail.to.includes('stuck@example.com'))).toEqual([]);
  } finally {
    await dying.close(true);
  }
}, 20_000);
