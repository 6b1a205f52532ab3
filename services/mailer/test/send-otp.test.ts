import { randomBytes } from 'node:crypto';
import {
  codesKey,
  DELETION_SCHEDULED_JOB,
  type DeletionScheduledJobData,
  EMAIL_JOB_OPTIONS,
  EMAIL_QUEUE,
  REDACTED_CODE,
  SEND_OTP_JOB,
  type SendOtpJobData,
  sealCode,
  sendOtpJobId,
} from '@tessera/contracts';
import {
  createTestRedis,
  mentionsCode,
  type SmtpSink,
  startSmtpSink,
  type TestRedis,
} from '@tessera/testing';
import { type Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type MailerConfig } from '../src/config.ts';
import type { EmailResult } from '../src/deliver.ts';
import { createTransport, type MailTransport } from '../src/transport.ts';
import { createMailWorker } from '../src/worker.ts';

const MAIL_FROM = 'Tessera <no-reply@tessera.test>';
// 20 ms doubling to 100 ms instead of 1 s to 15 s, so that dozens of retries take about a second.
const FAST_BACKOFF = { firstMs: 20, maxMs: 100 };

let redis: TestRedis;
let sink: SmtpSink;
let transport: MailTransport;
let mailWorker: ReturnType<typeof createMailWorker>;
let queue: Queue<SendOtpJobData>;
let inspector: Redis;
let config: MailerConfig;
/** The mailer's clock: the wall clock moved by `clockShift` ms, for codes that expire mid-test. */
let clockShift = 0;
/** Every line the mailer logged, as written (JSON). */
const lines: string[] = [];

beforeAll(async () => {
  redis = createTestRedis();
  sink = await startSmtpSink();
  config = loadConfig({
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
  mailWorker = createMailWorker({
    config,
    transport,
    logger,
    now: () => new Date(Date.now() + clockShift),
    backoff: FAST_BACKOFF,
    // An hour: an account notice of this file that fails is not tried again while the file runs.
    noticeBackoff: { firstMs: 3_600_000, maxMs: 3_600_000 },
  });
  queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
  });
  inspector = new Redis(redis.url);
});

afterEach(() => {
  clockShift = 0;
  sink.failNext(0);
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

interface CodeEmail {
  to: string;
  code: string;
  expiresAt: string;
  series?: string;
}

/** A code email's job data as the gateway queues it: the code sealed with the (development) key. */
function jobData({ to, code, expiresAt, series }: CodeEmail): SendOtpJobData {
  codesSent.add(code);
  return { to, sealedCode: sealCode(code, to, config.mailJobKeys), expiresAt, ...(series && { series }) };
}

/** Enqueues a code email exactly as the gateway does; `outcome` settles when the worker is done with it. */
async function send(email: CodeEmail, jobId = nextJobId()) {
  const outcome = settled(jobId);
  outcome.catch(() => {}); // awaited by the test; this only keeps a failed enqueue from leaving it unhandled
  await queue.add(SEND_OTP_JOB, jobData(email), { ...EMAIL_JOB_OPTIONS, jobId });
  return { jobId, outcome };
}

const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString();

type Outcome =
  | { state: 'completed'; job: Job<SendOtpJobData>; result: EmailResult }
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
    const onCompleted = (job: Job, result: EmailResult) => {
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

/** Waits until the retained job's address has been masked, with its code if it had one (the worker redacts both at once, asynchronously). */
async function redactedJob(jobId: string, timeoutMs = 5_000): Promise<Job<SendOtpJobData>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await queue.getJob(jobId);
    if (job?.data.to.includes('***@')) return job;
    if (Date.now() > deadline) throw new Error(`job ${jobId} was not ${job ? 'redacted' : 'retained'}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

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

/** The `failed` events' log entries of a job. */
const failuresOf = (jobId: string) =>
  lines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((entry) => entry.jobId === jobId && entry.msg === 'send-otp failed');

describe('send-otp jobs', () => {
  it('delivers the code by SMTP and keeps nothing of it in Redis', async () => {
    const { jobId, outcome } = await send({ to: 'alice@example.com', code: '4826', expiresAt: inMinutes(5) });

    expect(await outcome).toMatchObject({ state: 'completed', result: { sent: true } });
    const mails = mailsTo('alice@example.com');
    expect(mails).toHaveLength(1);
    const [mail] = mails;
    expect(mail?.to).toEqual(['alice@example.com']);
    expect(mail?.from).toBe('no-reply@tessera.test');
    expect(mail?.subject).toBe('4826 is your Tessera sign-in code');
    expect(mail?.text).toContain('Your Tessera sign-in code is:\n\n4826\n');
    expect(mail?.text).toMatch(/It expires in 5 minutes, at \d\d:\d\d UTC\./);
    expect(mail?.html).toMatch(/<p[^>]*>4826<\/p>/);
    // Automated: an out-of-office reply would only go back to the no-reply address.
    expect(mail?.headers['auto-submitted']).toBe('auto-generated');

    // removeOnComplete: the delivered job is gone; what stays is the record that SMTP accepted it.
    expect(await queue.getJob(jobId)).toBeUndefined();
    expect(await inspector.exists(`${redis.bullmqPrefix}:${EMAIL_QUEUE}:delivered:${jobId}`)).toBe(1);
    expect(mentionsCode(await everythingStoredInRedis(), '4826')).toBe(false);
  });

  it('holds the code of a queued job only sealed: the job hash in Redis has no code in clear', async () => {
    await mailWorker.worker.pause();
    let sent: Awaited<ReturnType<typeof send>>;
    try {
      sent = await send({ to: 'amy@example.com', code: '5372', expiresAt: inMinutes(5) });
      const hash = await inspector.hgetall(`${redis.bullmqPrefix}:${EMAIL_QUEUE}:${sent.jobId}`);
      expect(JSON.parse(hash.data ?? '{}')).toMatchObject({
        to: 'amy@example.com',
        sealedCode: expect.any(String),
      });
      expect(mentionsCode(JSON.stringify(hash), '5372')).toBe(false);
      expect(mentionsCode(await everythingStoredInRedis(), '5372')).toBe(false);
    } finally {
      await mailWorker.worker.resume();
    }
    expect(await sent.outcome).toMatchObject({ state: 'completed', result: { sent: true } });
    expect(mailsTo('amy@example.com').map((mail) => mail.subject)).toEqual([
      '5372 is your Tessera sign-in code',
    ]);
  });

  it('sends one email when the same code is enqueued twice', async () => {
    const data = jobData({ to: 'bob@example.com', code: '5937', expiresAt: inMinutes(5) });
    // Paused so that both enqueues certainly land while the first job still waits, as when the
    // gateway retries an enqueue whose reply was lost.
    await mailWorker.worker.pause();
    const jobId = nextJobId();
    const outcome = settled(jobId);
    try {
      await queue.add(SEND_OTP_JOB, data, { ...EMAIL_JOB_OPTIONS, jobId });
      await queue.add(SEND_OTP_JOB, data, { ...EMAIL_JOB_OPTIONS, jobId });
      expect(await queue.getWaitingCount()).toBe(1);
    } finally {
      await mailWorker.worker.resume();
    }

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

  it('does not send again a job whose email SMTP has already accepted', async () => {
    // As after a mailer crash between the acceptance and the job's completion: the same job (same
    // id, same data) runs again.
    const email = { to: 'bill@example.com', code: '3728', expiresAt: inMinutes(5) };
    const first = await send(email);
    expect(await first.outcome).toMatchObject({ state: 'completed', result: { sent: true } });

    const again = await send(email, first.jobId);
    expect(await again.outcome).toMatchObject({ state: 'completed', result: { skipped: 'delivered' } });
    expect(mailsTo('bill@example.com')).toHaveLength(1);
  });

  it("sends only the newest code of an address's series: an older one still waiting is dropped as replaced", async () => {
    const to = 'twice@example.com';
    const series = randomBytes(32).toString('hex');
    // Both queued while no mailer takes them, as through an SMTP outage, each recorded as the gateway
    // records it once queued.
    await mailWorker.worker.pause();
    let older: Awaited<ReturnType<typeof send>>;
    let newer: Awaited<ReturnType<typeof send>>;
    try {
      older = await send({ to, code: '4736', expiresAt: inMinutes(4), series });
      await inspector.hset(codesKey(redis.bullmqPrefix, series), 'newest', older.jobId, older.jobId, '1');
      newer = await send({ to, code: '5829', expiresAt: inMinutes(5), series });
      await inspector.hset(codesKey(redis.bullmqPrefix, series), 'newest', newer.jobId, newer.jobId, '1');
    } finally {
      await mailWorker.worker.resume();
    }
    expect(await older.outcome).toMatchObject({ state: 'completed', result: { skipped: 'replaced' } });
    expect(await newer.outcome).toMatchObject({ state: 'completed', result: { sent: true } });
    expect(mailsTo(to).map((mail) => mail.subject)).toEqual(['5829 is your Tessera sign-in code']);
  });

  it('sends a code whose series holds no record of it: its record failed, or came after a newer one', async () => {
    const series = randomBytes(32).toString('hex');
    const unrecorded = await send({
      to: 'unrecorded@example.com',
      code: '6374',
      expiresAt: inMinutes(5),
      series,
    });
    expect(await unrecorded.outcome).toMatchObject({ state: 'completed', result: { sent: true } });
    // Another job is the newest recorded, but this one was never recorded: it is sent.
    await inspector.hset(codesKey(redis.bullmqPrefix, series), 'newest', nextJobId());
    const late = await send({ to: 'unrecorded@example.com', code: '7485', expiresAt: inMinutes(5), series });
    expect(await late.outcome).toMatchObject({ state: 'completed', result: { sent: true } });
    expect(mailsTo('unrecorded@example.com')).toHaveLength(2);
  });

  it('retries a temporary SMTP failure with backoff and delivers once', async () => {
    sink.failNext(2); // 451, twice
    const { jobId, outcome } = await send({ to: 'carol@example.com', code: '6148', expiresAt: inMinutes(5) });

    const result = await outcome;
    expect(result.state).toBe('completed');
    expect(result.job.attemptsMade).toBe(3);
    expect(mailsTo('carol@example.com')).toHaveLength(1);
    expect(mailsTo('carol@example.com')[0]?.subject).toBe('6148 is your Tessera sign-in code');

    const failures = failuresOf(jobId);
    expect(failures.map(({ attempt, final, level }) => ({ attempt, final, level }))).toEqual([
      { attempt: 1, final: false, level: 40 },
      { attempt: 2, final: false, level: 40 },
    ]);
    expect(String(failures[0]?.reason)).toContain('451');
  });

  it('keeps retrying through an outage longer than 5 attempts, and delivers every code once', async () => {
    // 40 refusals over 4 codes: at least one code fails 10 times, twice the retries it used to get.
    sink.failNext(40);
    const emails = ['4273', '4385', '4497', '4519'].map((code, i) => ({
      to: `outage${i}@example.com`,
      code,
      expiresAt: inMinutes(5),
    }));
    const sent = await Promise.all(emails.map((email) => send(email)));

    const results = await Promise.all(sent.map(({ outcome }) => outcome));
    expect(results.map((result) => result.state)).toEqual([
      'completed',
      'completed',
      'completed',
      'completed',
    ]);
    const attempts = results.map((result) => result.job.attemptsMade);
    expect(attempts.reduce((sum, n) => sum + n, 0)).toBe(40 + emails.length);
    expect(Math.max(...attempts)).toBeGreaterThanOrEqual(11);
    for (const { to, code } of emails)
      expect(mailsTo(to).map((mail) => mail.subject)).toEqual([`${code} is your Tessera sign-in code`]);
  });

  it('drops a code that expires during an outage: no email, the job fails as expired and holds no code', async () => {
    sink.failNext(1_000_000);
    const { jobId, outcome } = await send({ to: 'dan@example.com', code: '8592', expiresAt: inMinutes(1) });
    // Retrying while the code is valid…
    for (let i = 0; i < 400 && failuresOf(jobId).length < 3; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(failuresOf(jobId).length).toBeGreaterThanOrEqual(3);
    // …until the mailer's clock passes the code's expiry.
    clockShift = 61_000;

    const result = await outcome;
    expect(result.state).toBe('failed');
    // Expired when the next attempt starts, or when a failed one finds no retry worth making.
    expect(result.job.failedReason).toMatch(/^Expired before it could be sent/);
    expect(mailsTo('dan@example.com')).toEqual([]);
    const kept = await redactedJob(jobId);
    expect(kept.data.sealedCode).toBe(REDACTED_CODE);
    // Kept with the stack of its last attempt only, not one per attempt.
    expect(kept.stacktrace).toHaveLength(1);
    expect(failuresOf(jobId).at(-1)).toMatchObject({ final: true });
    expect(mentionsCode(await everythingStoredInRedis(), '8592')).toBe(false);
  });

  it('drops a code that expired while it waited, without trying to send it', async () => {
    const { jobId, outcome } = await send({ to: 'dave@example.com', code: '7253', expiresAt: inMinutes(-1) });

    const result = await outcome;
    expect(result).toMatchObject({ state: 'failed', job: { attemptsMade: 1 } });
    expect(mailsTo('dave@example.com')).toEqual([]);
    expect((await redactedJob(jobId)).failedReason).toBe('Expired before it could be sent');
  });

  it('does not retry a permanent SMTP rejection, and redacts the code and the address of the failed job', async () => {
    sink.failNext(1, 550);
    const email = { to: 'erin@example.com', code: '8364', expiresAt: inMinutes(5) };
    // Were the job retried, the retry would be accepted and the job complete.
    const { jobId, outcome } = await send(email);

    const result = await outcome;
    expect(result.state).toBe('failed');
    expect(result.job.attemptsMade).toBe(1);
    expect(await queue.getJobState(jobId)).toBe('failed');
    expect(mailsTo('erin@example.com')).toEqual([]);

    const retained = await redactedJob(jobId);
    expect(retained.data).toEqual({
      to: 'e***@example.com',
      expiresAt: email.expiresAt,
      sealedCode: REDACTED_CODE,
    });
    expect(retained.failedReason).toBe('SMTP rejected the message permanently: 550 Refused');
    expect(mentionsCode(await everythingStoredInRedis(), '8364')).toBe(false);
  });

  it("keeps a permanent refusal's reply without the recipient, in whatever form the server names them", async () => {
    sink.failNext(1, 550, 'RCPT TO', "5.1.1 <grace.o'hara>: Recipient address rejected: User unknown");
    const { jobId, outcome } = await send({
      to: "grace.o'hara@example.com",
      code: '2719',
      expiresAt: inMinutes(5),
    });

    expect((await outcome).state).toBe('failed');
    expect((await redactedJob(jobId)).failedReason).toBe(
      'SMTP rejected the message permanently: 550 5.1.1 <g***@example.com>: Recipient address rejected: User unknown',
    );
    expect(await everythingStoredInRedis()).not.toMatch(/grace|hara/i);
  });

  it('retries a sender refused with a 5xx, which is the configuration and not the message, and delivers once', async () => {
    // MAIL_FROM not (yet) allowed by the mail server: the operator fixes it while the code is valid.
    sink.failNext(2, 553, 'MAIL FROM');
    const { jobId, outcome } = await send({ to: 'frank@example.com', code: '6382', expiresAt: inMinutes(5) });

    const result = await outcome;
    expect(result.state).toBe('completed');
    expect(result.job.attemptsMade).toBe(3);
    expect(mailsTo('frank@example.com').map((mail) => mail.subject)).toEqual([
      '6382 is your Tessera sign-in code',
    ]);
    expect(failuresOf(jobId).map(({ final }) => final)).toEqual([false, false]);
  });

  it('retries a recipient the relay refuses on policy (5.7.x), which is its configuration, and delivers once', async () => {
    // "Relay access denied": the relay wants a login, or this sender, before it takes any recipient.
    sink.failNext(2, 554, 'RCPT TO', '5.7.1 Relay access denied');
    const { jobId, outcome } = await send({ to: 'gwen@example.com', code: '5163', expiresAt: inMinutes(5) });

    const result = await outcome;
    expect(result.state).toBe('completed');
    expect(mailsTo('gwen@example.com').map((mail) => mail.subject)).toEqual([
      '5163 is your Tessera sign-in code',
    ]);
    expect(failuresOf(jobId).map(({ final }) => final)).toEqual([false, false]);
  });

  it("retries a recipient the relay refuses in words alone, as Exim's stock configuration does, and delivers once", async () => {
    // No enhanced status: Exim's "550 relay not permitted" to a mailer it does not relay for.
    for (const [reply, to, code] of [
      ['relay not permitted', 'hedy@example.com', '6153'],
      ['Authentication required', 'hedy@example.org', '6154'],
    ] as const) {
      sink.failNext(1, 550, 'RCPT TO', reply);
      const { jobId, outcome } = await send({ to, code, expiresAt: inMinutes(5) });
      expect((await outcome).state, reply).toBe('completed');
      expect(failuresOf(jobId).map(({ final }) => final)).toEqual([false]);
      expect(mailsTo(to)).toHaveLength(1);
    }
    // An address is no word of the server's: this mailbox does not exist, for good.
    sink.failNext(1, 550, 'RCPT TO', '<relay.team@example.com>: Recipient address rejected: User unknown');
    const unknown = await send({ to: 'relay.team@example.com', code: '6157', expiresAt: inMinutes(5) });
    expect((await unknown.outcome).state).toBe('failed');
  });

  it('retries a recipient whose mailbox is full (552), as RFC 5321 has it, and fails a message too large (552 to its content)', async () => {
    sink.failNext(1, 552, 'RCPT TO', '5.2.2 Mailbox full');
    const full = await send({ to: 'hilde@example.com', code: '6159', expiresAt: inMinutes(5) });
    expect((await full.outcome).state).toBe('completed');
    expect(mailsTo('hilde@example.com')).toHaveLength(1);

    sink.failNext(1, 552, 'DATA', '5.3.4 Message size exceeds fixed limit');
    const large = await send({ to: 'holger@example.com', code: '6163', expiresAt: inMinutes(5) });
    expect((await large.outcome).state).toBe('failed');
    expect((await redactedJob(large.jobId)).failedReason).toBe(
      'SMTP rejected the message permanently: 552 5.3.4 Message size exceeds fixed limit',
    );
  });

  it('retries a recipient refused as a bad sequence of commands (503), which is the conversation, and delivers once', async () => {
    sink.failNext(1, 503, 'RCPT TO', '5.5.1 Error: authentication required');
    const { jobId, outcome } = await send({ to: 'ines@example.com', code: '5927', expiresAt: inMinutes(5) });

    expect((await outcome).state).toBe('completed');
    expect(mailsTo('ines@example.com')).toHaveLength(1);
    expect(failuresOf(jobId).map(({ final }) => final)).toEqual([false]);
  });

  it('fails a notice addressed to several recipients, with words beside the address or a control character in it, sending nothing', async () => {
    const notices = new Queue<DeletionScheduledJobData>(EMAIL_QUEUE, {
      connection: { url: redis.url },
      prefix: redis.bullmqPrefix,
    });
    for (const [i, to] of [
      'list-1@example.net, list-2@example.org',
      '"Call +1 555 0100 to keep your account" <list-3@example.com>',
      'Everyone: list-4@example.com, list-5@example.com;',
      'list-6\x01x@example.com',
      'list-7\u0085@example.com',
    ].entries()) {
      const jobId = `deletion-scheduled-00000000-0000-4000-8000-00000000010${i}-0`;
      const outcome = settled(jobId);
      await notices.add(
        DELETION_SCHEDULED_JOB,
        { to, scheduledFor: inMinutes(60) },
        { ...EMAIL_JOB_OPTIONS, jobId },
      );
      const result = await outcome;
      expect(result.state, to).toBe('failed');
      expect(result.job.failedReason, to).toBe('Malformed deletion-scheduled job data');
    }
    await notices.close();
    expect(sink.messages.filter((mail) => mail.to.some((address) => address.startsWith('list-')))).toEqual(
      [],
    );
  });

  it("waits an account notice's own backoff before trying it again, not a code's", async () => {
    const noticeId = 'deletion-scheduled-00000000-0000-4000-8000-000000000098-0';
    const notices = new Queue<DeletionScheduledJobData>(EMAIL_QUEUE, {
      connection: { url: redis.url },
      prefix: redis.bullmqPrefix,
    });
    // Both refused once (451): the code is tried again at once and delivered; the notice waits.
    sink.failNext(2, 451);
    await notices.add(
      DELETION_SCHEDULED_JOB,
      { to: 'nils@example.com', scheduledFor: inMinutes(60) },
      { ...EMAIL_JOB_OPTIONS, jobId: noticeId },
    );
    await expect.poll(() => notices.getJobState(noticeId)).toBe('delayed');
    const { outcome } = await send({ to: 'hugo@example.com', code: '5381', expiresAt: inMinutes(5) });
    expect((await outcome).state).toBe('completed');

    expect(await notices.getJobState(noticeId)).toBe('delayed');
    expect(mailsTo('nils@example.com')).toEqual([]);
    await notices.remove(noticeId);
    await notices.close();
  });

  it('masks the address of an account notice that failed for good', async () => {
    sink.failNext(1, 550);
    const jobId = 'deletion-scheduled-00000000-0000-4000-8000-000000000099-0';
    const outcome = settled(jobId);
    const notices = new Queue<DeletionScheduledJobData>(EMAIL_QUEUE, {
      connection: { url: redis.url },
      prefix: redis.bullmqPrefix,
    });
    await notices.add(
      DELETION_SCHEDULED_JOB,
      { to: 'nora@example.com', scheduledFor: inMinutes(60) },
      { ...EMAIL_JOB_OPTIONS, jobId },
    );
    await notices.close();

    expect((await outcome).state).toBe('failed');
    expect(mailsTo('nora@example.com')).toEqual([]);
    expect((await redactedJob(jobId)).data).toMatchObject({ to: 'n***@example.com' });
    expect(await everythingStoredInRedis()).not.toContain('nora@');
  });

  it('fails a job with malformed data at once, without sending', async () => {
    const jobId = nextJobId();
    const outcome = settled(jobId);
    await queue.add(
      SEND_OTP_JOB,
      { ...jobData({ to: 'fred@example.com', code: '5197', expiresAt: 'tomorrow' }) },
      {
        ...EMAIL_JOB_OPTIONS,
        jobId,
      },
    );
    const result = await outcome;
    expect(result.state).toBe('failed');
    expect(result.job.attemptsMade).toBe(1);
    expect(mailsTo('fred@example.com')).toEqual([]);
    expect((await redactedJob(jobId)).failedReason).toBe('Malformed send-otp job data');
  });

  it('leaves a code sealed with another key under its key id to a mailer that holds that key', async () => {
    // MAIL_JOB_KEY differs between processes: this file's mailer has another key named `dev`.
    const elsewhere = loadConfig({
      APP_ENV: 'test',
      REDIS_URL: redis.url,
      BULLMQ_PREFIX: redis.bullmqPrefix,
      SMTP_URL: sink.url,
      MAIL_FROM,
      MAIL_JOB_KEY: `dev:${randomBytes(32).toString('base64')}`,
    });
    const jobId = nextJobId();
    codesSent.add('7264');
    const sealedCode = sealCode('7264', 'olga@example.com', elsewhere.mailJobKeys);
    await queue.add(
      SEND_OTP_JOB,
      { to: 'olga@example.com', sealedCode, expiresAt: inMinutes(5) },
      { ...EMAIL_JOB_OPTIONS, jobId },
    );
    for (let i = 0; i < 400 && failuresOf(jobId).length < 2; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(failuresOf(jobId)[0]).toMatchObject({
      final: false,
      reason: 'MAIL_JOB_KEY "dev" is not the key that sealed the code',
    });

    const holder = createMailWorker({
      config: elsewhere,
      transport,
      logger: pino({ level: 'silent' }),
      backoff: FAST_BACKOFF,
    });
    try {
      await sink.waitFor((mail) => mail.to.includes('olga@example.com'));
    } finally {
      await holder.close();
    }
    // Sent once, by the mailer that holds the key; this file's never failed it for good.
    expect(mailsTo('olga@example.com').map((mail) => mail.subject)).toEqual([
      '7264 is your Tessera sign-in code',
    ]);
    expect(failuresOf(jobId).some((failure) => failure.final)).toBe(false);
  });

  it('fails at once a code sealed for another address, without sending', async () => {
    const jobId = nextJobId();
    const outcome = settled(jobId);
    const stolen = jobData({ to: 'gina@example.com', code: '6283', expiresAt: inMinutes(5) });
    await queue.add(SEND_OTP_JOB, { ...stolen, to: 'mallory@example.com' }, { ...EMAIL_JOB_OPTIONS, jobId });

    expect(await outcome).toMatchObject({ state: 'failed', job: { attemptsMade: 1 } });
    expect(mailsTo('mallory@example.com')).toEqual([]);
    expect((await redactedJob(jobId)).failedReason).toBe('Sealed code does not authenticate');
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
        reason: 'SMTP rejected the message permanently: 550 Refused',
      }),
    );

    const log = lines.join('');
    // Every code this file has sent so far: delivered, retried, expired or failed.
    expect(codesSent).toContain('7391');
    for (const code of codesSent) {
      expect(mentionsCode(log, code), `code ${code} appears in the logs`).toBe(false);
    }
    expect(log).not.toContain('grace@');
    expect(log).not.toContain('heidi@');
  });
});
