import {
  EMAIL_QUEUE,
  REDACTED_CODE,
  SEND_OTP_JOB,
  SEND_OTP_JOB_OPTIONS,
  type SendOtpJobData,
  sendOtpJobId,
} from '@tessera/contracts';
import { createTestRedis, type SmtpSink, startSmtpSink, type TestRedis } from '@tessera/testing';
import { type Job, type JobsOptions, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import type { SendOtpResult } from '../src/send-otp.job.ts';
import { createTransport, type MailTransport } from '../src/transport.ts';
import { createMailWorker } from '../src/worker.ts';

const MAIL_FROM = 'Tessera <no-reply@tessera.test>';
// 50 ms instead of the contract's 1 s base delay, so a test that retries takes well under a second.
const FAST_BACKOFF = { backoff: { type: 'exponential', delay: 50 } } satisfies JobsOptions;

let redis: TestRedis;
let sink: SmtpSink;
let transport: MailTransport;
let mailWorker: ReturnType<typeof createMailWorker>;
let queue: Queue<SendOtpJobData>;
let inspector: Redis;
/** Every line the mailer logged, as written (JSON). */
const lines: string[] = [];

beforeAll(async () => {
  redis = createTestRedis();
  sink = await startSmtpSink();
  const config = loadConfig({
    APP_ENV: 'test',
    REDIS_URL: redis.url,
    BULLMQ_PREFIX: redis.bullmqPrefix,
    SMTP_URL: sink.url,
    MAIL_FROM,
    LOG_LEVEL: 'info',
  });
  transport = createTransport(config);
  // `base: null` drops pid and hostname, so no number in a log line can equal a code by chance.
  const logger = pino({ level: config.log.level, base: null }, { write: (line: string) => lines.push(line) });
  mailWorker = createMailWorker({ config, transport, logger });
  queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
  });
  inspector = new Redis(redis.url);
});

afterAll(async () => {
  await mailWorker?.close();
  transport?.close();
  await queue?.close();
  await inspector?.quit();
  await sink?.close();
  await redis?.flush();
});

/**
 * The codes this file sends. None has a 0, so none can match a digit run of the job ids below; all are
 * above 2,100, so none can be a line number in the stack traces BullMQ keeps with a failed job.
 */
const codesSent = new Set<string>();

let issued = 0;
/** Code ids are fixed, not random, so that no job id can contain a code by chance. */
function nextJobId() {
  issued += 1;
  return sendOtpJobId(`00000000-0000-4000-8000-${String(issued).padStart(12, '0')}`);
}

/** Enqueues a code email exactly as the gateway does; `outcome` settles when the worker is done with it. */
async function send(data: SendOtpJobData, options: JobsOptions = {}, jobId = nextJobId()) {
  codesSent.add(data.code);
  const outcome = settled(jobId);
  outcome.catch(() => {}); // awaited by the test; this only keeps a failed enqueue from leaving it unhandled
  await queue.add(SEND_OTP_JOB, data, { ...SEND_OTP_JOB_OPTIONS, jobId, ...options });
  return { jobId, outcome };
}

const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString();

type Outcome =
  | { state: 'completed'; job: Job<SendOtpJobData>; result: SendOtpResult }
  | { state: 'failed'; job: Job<SendOtpJobData>; error: Error };

/**
 * Resolves once the worker has finished with the job: completed, or failed with no retry left (a
 * failure that will be retried leaves the job `delayed`). Call it before enqueueing.
 */
function settled(jobId: string, timeoutMs = 10_000): Promise<Outcome> {
  const { worker } = mailWorker;
  return new Promise((resolve, reject) => {
    const finish = (outcome: Outcome) => {
      clearTimeout(timer);
      worker.off('completed', onCompleted);
      worker.off('failed', onFailed);
      resolve(outcome);
    };
    // The worker takes every job of the queue; those of this file are send-otp jobs.
    const onCompleted = (job: Job, result: SendOtpResult) => {
      if (job.id === jobId) finish({ state: 'completed', job, result });
    };
    const onFailed = (job: Job | undefined, error: Error) => {
      if (job?.id !== jobId) return;
      job.getState().then((state) => {
        if (state === 'failed') finish({ state: 'failed', job, error });
      }, reject);
    };
    const timer = setTimeout(() => {
      worker.off('completed', onCompleted);
      worker.off('failed', onFailed);
      reject(new Error(`job ${jobId} did not settle within ${timeoutMs} ms`));
    }, timeoutMs);
    worker.on('completed', onCompleted);
    worker.on('failed', onFailed);
  });
}

const mailsTo = (address: string) => sink.messages.filter((mail) => mail.to.includes(address));

/** Waits until the retained job's code has been replaced (the worker redacts it asynchronously). */
async function redactedJob(jobId: string, timeoutMs = 5_000): Promise<Job<SendOtpJobData>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await queue.getJob(jobId);
    if (job?.data.code === REDACTED_CODE || Date.now() > deadline) {
      if (!job) throw new Error(`job ${jobId} is not retained`);
      return job;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** True when `code` appears as a number of its own (not inside a longer one, like a timestamp). */
const mentions = (text: string, code: string) => new RegExp(`(?<!\\d)${code}(?!\\d)`).test(text);

/** Every key and value this file's queue keeps in Redis, as text. */
async function everythingStoredInRedis(): Promise<string> {
  const parts: string[] = [];
  for await (const keys of inspector.scanStream({ match: `${redis.bullmqPrefix}:*`, count: 500 })) {
    for (const key of keys as string[]) {
      parts.push(key);
      const type = await inspector.type(key);
      if (type === 'string') parts.push((await inspector.get(key)) ?? '');
      else if (type === 'hash') parts.push(JSON.stringify(await inspector.hgetall(key)));
      else if (type === 'list') parts.push(...(await inspector.lrange(key, 0, -1)));
      else if (type === 'set') parts.push(...(await inspector.smembers(key)));
      else if (type === 'zset') parts.push(...(await inspector.zrange(key, 0, '-1')));
      else if (type === 'stream') parts.push(JSON.stringify(await inspector.xrange(key, '-', '+')));
      else throw new Error(`cannot read ${type} key ${key}`);
    }
  }
  return parts.join('\n');
}

describe('send-otp jobs', () => {
  it('delivers the code by SMTP and keeps nothing of it in Redis', async () => {
    const { jobId, outcome } = await send({ to: 'alice@example.com', code: '4826', expiresAt: inMinutes(5) });

    expect(await outcome).toMatchObject({ state: 'completed', result: { sent: true } });
    const mails = mailsTo('alice@example.com');
    expect(mails).toHaveLength(1);
    const [mail] = mails;
    expect(mail?.to).toEqual(['alice@example.com']);
    expect(mail?.from).toBe('no-reply@tessera.test');
    expect(mail?.subject).toBe('4826 is your sign-in code');
    expect(mail?.text).toContain('Your sign-in code is 4826');
    expect(mail?.text).toContain('It expires in 5 minutes.');
    expect(mail?.html).toMatch(/<p[^>]*>4826<\/p>/);

    // removeOnComplete: the delivered job, and with it the code, is gone.
    expect(await queue.getJob(jobId)).toBeUndefined();
    expect(mentions(await everythingStoredInRedis(), '4826')).toBe(false);
  });

  it('sends one email when the same code is enqueued twice', async () => {
    const data = { to: 'bob@example.com', code: '5937', expiresAt: inMinutes(5) };
    // Paused so that both enqueues certainly land while the first job still waits, as when the
    // gateway retries an enqueue whose reply was lost.
    await mailWorker.worker.pause();
    let first: Awaited<ReturnType<typeof send>>;
    try {
      first = await send(data);
      await queue.add(SEND_OTP_JOB, data, { ...SEND_OTP_JOB_OPTIONS, jobId: first.jobId });
      expect(await queue.getWaitingCount()).toBe(1);
    } finally {
      await mailWorker.worker.resume();
    }
    const { outcome } = first;

    expect(await outcome).toMatchObject({ state: 'completed' });
    // Nothing is left that could still send, so one email is the final count.
    expect(await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized')).toEqual({
      waiting: 0,
      active: 0,
      delayed: 0,
      prioritized: 0,
    });
    expect(mailsTo('bob@example.com')).toHaveLength(1);
  });

  it('retries a temporary SMTP failure with backoff and delivers once', async () => {
    sink.failNext(2); // 451, twice
    const { jobId, outcome } = await send(
      { to: 'carol@example.com', code: '6148', expiresAt: inMinutes(5) },
      FAST_BACKOFF,
    );

    const result = await outcome;
    expect(result.state).toBe('completed');
    expect(result.job.attemptsMade).toBe(3);
    expect(mailsTo('carol@example.com')).toHaveLength(1);
    expect(mailsTo('carol@example.com')[0]?.subject).toBe('6148 is your sign-in code');

    const failures = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((entry) => entry.jobId === jobId && entry.msg === 'send-otp failed');
    expect(failures.map(({ attempt, final, level }) => ({ attempt, final, level }))).toEqual([
      { attempt: 1, final: false, level: 40 },
      { attempt: 2, final: false, level: 40 },
    ]);
    expect(String(failures[0]?.reason)).toContain('451');
  });

  it('skips a code that has already expired: no email, and the job completes', async () => {
    const { jobId, outcome } = await send({ to: 'dave@example.com', code: '7253', expiresAt: inMinutes(-1) });

    expect(await outcome).toMatchObject({ state: 'completed', result: { skipped: 'expired' } });
    expect(mailsTo('dave@example.com')).toEqual([]);
    expect(await queue.getJob(jobId)).toBeUndefined();
    expect(lines.some((line) => line.includes(jobId) && line.includes('"skipped":"expired"'))).toBe(true);
  });

  it('does not retry a permanent SMTP rejection, and redacts the code of the failed job', async () => {
    sink.failNext(1, 550);
    const data = { to: 'erin@example.com', code: '8364', expiresAt: inMinutes(5) };
    // The contract's own backoff: were the job retried, the retry would be accepted and the job complete.
    const { jobId, outcome } = await send(data);

    const result = await outcome;
    expect(result.state).toBe('failed');
    expect(result.job.attemptsMade).toBe(1);
    expect(await queue.getJobState(jobId)).toBe('failed');
    expect(mailsTo('erin@example.com')).toEqual([]);

    const retained = await redactedJob(jobId);
    expect(retained.data).toEqual({ ...data, code: REDACTED_CODE });
    expect(retained.failedReason).toBe('SMTP rejected the message permanently (550)');
    expect(mentions(await everythingStoredInRedis(), '8364')).toBe(false);
  });

  it('fails a job with malformed data at once, without sending', async () => {
    const data = { to: 'fred@example.com', code: '5197', expiresAt: 'tomorrow' };
    const { jobId, outcome } = await send(data);
    const result = await outcome;
    expect(result.state).toBe('failed');
    expect(result.job.attemptsMade).toBe(1);
    expect(mailsTo('fred@example.com')).toEqual([]);
    expect((await redactedJob(jobId)).failedReason).toBe('Malformed send-otp job data');
  });

  it('gives up after the last attempt of a temporary failure, and redacts the code', async () => {
    sink.failNext(SEND_OTP_JOB_OPTIONS.attempts); // 451 on every attempt
    const { jobId, outcome } = await send(
      { to: 'frank@example.com', code: '9475', expiresAt: inMinutes(5) },
      FAST_BACKOFF,
    );

    const result = await outcome;
    expect(result.state).toBe('failed');
    expect(result.job.attemptsMade).toBe(SEND_OTP_JOB_OPTIONS.attempts);
    expect(mailsTo('frank@example.com')).toEqual([]);
    expect((await redactedJob(jobId)).data.code).toBe(REDACTED_CODE);
    expect(lines.some((line) => line.includes(jobId) && line.includes('"final":true'))).toBe(true);
    expect(mentions(await everythingStoredInRedis(), '9475')).toBe(false);
  });
});

describe('logs', () => {
  it('never contain a code, whether the email was delivered or failed', async () => {
    const delivered = await send({ to: 'grace@example.com', code: '7391', expiresAt: inMinutes(5) });
    expect((await delivered.outcome).state).toBe('completed');
    sink.failNext(1, 550);
    const rejected = await send({ to: 'heidi@example.com', code: '6582', expiresAt: inMinutes(5) });
    expect((await rejected.outcome).state).toBe('failed');
    await redactedJob(rejected.jobId);

    // Both jobs were logged (job id, masked address), so the checks below are not vacuous.
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries).toContainEqual(
      expect.objectContaining({
        msg: 'send-otp done',
        jobId: delivered.jobId,
        to: 'g***@example.com',
        sent: true,
      }),
    );
    expect(entries).toContainEqual(
      expect.objectContaining({
        msg: 'send-otp failed',
        jobId: rejected.jobId,
        final: true,
        reason: 'SMTP rejected the message permanently (550)',
      }),
    );

    const log = lines.join('');
    // Every code this file has sent so far: delivered, retried, skipped or failed.
    expect(codesSent).toContain('7391');
    for (const code of codesSent) {
      expect(mentions(log, code), `code ${code} appears in the logs`).toBe(false);
    }
    expect(log).not.toContain('grace@');
    expect(log).not.toContain('heidi@');
  });
});
