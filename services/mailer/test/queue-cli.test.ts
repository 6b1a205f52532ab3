import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import {
  DELETION_SCHEDULED_JOB,
  type DeletionScheduledJobData,
  EMAIL_QUEUE,
  parseMailJobKeys,
  REDACTED_CODE,
  SEND_OTP_JOB,
  type SendOtpJobData,
  sealCode,
  sendOtpJobId,
} from '@tessera/contracts';
import { createTestRedis, mentionsCode, type TestRedis } from '@tessera/testing';
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';

// The operator commands as run by `pnpm queue:status` / `pnpm queue:retry-failed`, against a queue
// filled here: waiting, delayed and failed jobs.
const mailerDir = fileURLToPath(new URL('..', import.meta.url));

let redis: TestRedis;
let queue: Queue<SendOtpJobData>;

/** Runs the CLI as its own process; resolves with its exit code and output. */
async function cli(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['src/queue-cli.ts', ...args], {
    cwd: mailerDir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      REDIS_URL: redis.url,
      BULLMQ_PREFIX: redis.bullmqPrefix,
      ...env,
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk;
  });
  const [code] = await once(child, 'close');
  return { code: code as number, stdout, stderr };
}

const minutesFromNow = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString();
const jobId = (n: number) => sendOtpJobId(`00000000-0000-4000-8000-${String(n).padStart(12, '0')}`);

const keys = parseMailJobKeys();
/** The oldest waiting job's timestamp: 90 s before the queue was filled. */
let oldestQueuedAt: number;
/** The codes of this file, in clear, that no output may show. */
const codes: string[] = [];
const otpJob = (to: string, code: string, expiresAt: string): SendOtpJobData => {
  codes.push(code);
  return { to, sealedCode: sealCode(code, to, keys), expiresAt };
};

const failing: Array<[number, SendOtpJobData]> = [
  [1, otpJob('alice@example.com', '4826', minutesFromNow(5))],
  [2, otpJob('bob@example.com', '5937', minutesFromNow(5))],
  [3, otpJob('carol@example.com', '6148', minutesFromNow(-1))],
  [4, { to: 'dave@example.com', sealedCode: REDACTED_CODE, expiresAt: minutesFromNow(5) }],
];
/** An account notice that failed for good: the mailer masked its address, so it cannot be sent again. */
const NOTICE_ID = 'deletion-scheduled-masked';
const maskedNotice: DeletionScheduledJobData = { to: 'h***@example.com', scheduledFor: minutesFromNow(60) };
const pending: Array<[number, SendOtpJobData]> = [
  [5, otpJob('erin@example.com', '7253', minutesFromNow(5))],
  [6, otpJob('frank@example.com', '8364', minutesFromNow(5))],
  [7, otpJob('grace@example.com', '9475', minutesFromNow(5))],
];

beforeAll(async () => {
  redis = createTestRedis();
  queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
  });
  for (const [n, data] of failing)
    await queue.add(SEND_OTP_JOB, data, { jobId: jobId(n), attempts: 1, removeOnFail: false });
  const notices = new Queue<DeletionScheduledJobData>(EMAIL_QUEUE, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
  });
  await notices.add(DELETION_SCHEDULED_JOB, maskedNotice, {
    jobId: NOTICE_ID,
    attempts: 1,
    removeOnFail: false,
  });
  await notices.close();
  // A worker that fails jobs for good without touching their data, as when BullMQ gives up on a job
  // that stalled too often (the mailer's own final failures redact the code; retry-failed skips those).
  const rejecting = new Worker(
    EMAIL_QUEUE,
    async () => {
      throw new UnrecoverableError('SMTP rejected the message permanently: 550 Refused');
    },
    { connection: { url: redis.url }, prefix: redis.bullmqPrefix },
  );
  for (let i = 0; i < 200 && (await queue.getFailedCount()) < failing.length + 1; i++)
    await new Promise((resolve) => setTimeout(resolve, 25));
  await rejecting.close();

  const [[first, oldest], ...rest] = pending as [[number, SendOtpJobData], ...typeof pending];
  oldestQueuedAt = Date.now() - 90_000;
  await queue.add(SEND_OTP_JOB, oldest, { jobId: jobId(first), timestamp: oldestQueuedAt });
  for (const [n, data] of rest) await queue.add(SEND_OTP_JOB, data, { jobId: jobId(n) });
  await queue.add(SEND_OTP_JOB, pending[0]?.[1] as SendOtpJobData, { jobId: jobId(8), delay: 600_000 });
});

afterAll(async () => {
  await queue?.close();
  await redis?.flush();
});

/** The oldest waiting job's age in seconds, as a CLI run from `startedAt` until now can report it. */
function expectOldestAge(seconds: number, startedAt: number) {
  const age = (at: number) => Math.round((at - oldestQueuedAt) / 1000);
  expect(seconds).toBeGreaterThanOrEqual(age(startedAt));
  expect(seconds).toBeLessThanOrEqual(age(Date.now()));
}

describe('queue:status', () => {
  it('prints the counts, the oldest waiting job and the last failures, with no code or address', async () => {
    const startedAt = Date.now();
    const { code, stdout, stderr } = await cli(['status']);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toMatch(/^ {2}waiting +3$/m);
    expect(stdout).toMatch(/^ {2}active +0$/m);
    expect(stdout).toMatch(/^ {2}delayed +1$/m);
    expect(stdout).toMatch(/^ {2}failed +5$/m);
    expect(stdout).toMatch(/^ {2}completed +0$/m);
    expectOldestAge(Number(/^oldest waiting job: (\d+) s$/m.exec(stdout)?.[1]), startedAt);
    expect(stdout).toContain('last 5 failures:');
    expect(stdout).toMatch(
      /^ {2}otp-0{8}-0000-4000-8000-0{11}1 {2}attempts 1 {2}\S+Z {2}a\*\*\*@example\.com {2}SMTP rejected the message permanently: 550 Refused$/m,
    );
    for (const secret of codes) expect(mentionsCode(stdout, secret), `code ${secret}`).toBe(false);
    expect(stdout).not.toMatch(/\b(alice|bob|carol|dave|erin|frank|grace)@/);
  });

  it('prints the same as JSON with --json', async () => {
    const startedAt = Date.now();
    const { code, stdout } = await cli(['status', '--json']);
    expect(code).toBe(0);
    const status = JSON.parse(stdout);
    expect(status.counts).toEqual({ waiting: 3, active: 0, delayed: 1, failed: 5, completed: 0 });
    expectOldestAge(status.oldestWaitingSeconds, startedAt);
    expect(status.lastFailures).toHaveLength(5);
    expect(status.lastFailures).toContainEqual({
      id: jobId(3),
      attemptsMade: 1,
      failedReason: 'SMTP rejected the message permanently: 550 Refused',
      finishedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      to: 'c***@example.com',
    });
    for (const secret of codes) expect(mentionsCode(stdout, secret), `code ${secret}`).toBe(false);
  });
});

describe('queue:retry-failed', () => {
  it('retries one failed job by id', async () => {
    const { code, stdout } = await cli(['retry-failed', '--id', jobId(1)]);
    expect(code).toBe(0);
    expect(stdout).toBe('retried: 1\nskipped, code expired: 0\nskipped, redacted: 0\n');
    expect(await queue.getJobState(jobId(1))).toBe('waiting');
  });

  it('retries the other failed jobs, refusing expired codes and redacted jobs', async () => {
    const { code, stdout } = await cli(['retry-failed']);
    expect(code).toBe(0);
    expect(stdout).toBe('retried: 1\nskipped, code expired: 1\nskipped, redacted: 2\n');
    expect(await queue.getJobState(NOTICE_ID)).toBe('failed');
    expect(await queue.getJobState(jobId(2))).toBe('waiting');
    // A retried job gets its whole retry policy again.
    expect((await queue.getJob(jobId(2)))?.attemptsMade).toBe(0);
    expect(await queue.getJobState(jobId(3))).toBe('failed');
    expect(await queue.getJobState(jobId(4))).toBe('failed');
    for (const secret of codes) expect(mentionsCode(stdout, secret)).toBe(false);
  });

  it('says so when the job is not a failed one', async () => {
    const { code, stdout, stderr } = await cli(['retry-failed', '--id', jobId(5)]);
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toBe(`queue retry-failed: no failed job ${jobId(5)}\n`);
  });
});

describe('errors', () => {
  it('exits 1 with one line when Redis does not answer', async () => {
    const { code, stdout, stderr } = await cli(['status'], { REDIS_URL: 'redis://:hunter2@127.0.0.1:1' });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toMatch(/^queue status: cannot reach Redis at 127\.0\.0\.1:1: .*ECONNREFUSED.*\n$/);
    expect(stderr).not.toContain('hunter2');
  });

  it('leaves nothing under a mistyped prefix: the queue it reads there is empty', async () => {
    const mistyped = `${redis.bullmqPrefix}-typo`;
    const { code, stdout } = await cli(['status', '--json'], { BULLMQ_PREFIX: mistyped });
    expect(code).toBe(0);
    expect(JSON.parse(stdout).counts).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0, completed: 0 });
    const client = new Redis(redis.url);
    onTestFinished(() => client.quit().then(() => {}));
    expect(await client.keys(`${mistyped}*`)).toEqual([]);
  });

  it('prints the usage for --help, and succeeds', async () => {
    const { code, stdout } = await cli(['retry-failed', '--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /^usage: queue-cli\.ts status \[--json\]\n.*retry-failed \[--id <jobId>\] \[--json\]/,
    );
  });

  it('exits 2 with the usage on an unknown command', async () => {
    const { code, stderr } = await cli(['purge']);
    expect(code).toBe(2);
    expect(stderr).toContain('usage:');
  });
});
