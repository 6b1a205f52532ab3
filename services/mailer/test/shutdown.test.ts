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
  type SmtpSink,
  startPrivateRedis,
  startSmtpSink,
  startTcpProxy,
  type TcpProxy,
  type TestRedis,
} from '@tessera/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';

// The mailer as an operator runs it, stopped by SIGTERM in the middle of its work: the jobs it has
// started are delivered, the others stay queued for the next mailer, and no code goes out twice.
const mailerDir = fileURLToPath(new URL('..', import.meta.url));
const MAIL_JOB_KEY = `test:${randomBytes(32).toString('base64')}`;
const JOBS = 20;
const CONCURRENCY = 4;
// Each message takes the SMTP server this long, so that deliveries are in flight when SIGTERM comes.
const SMTP_DELAY_MS = 300;

let redis: TestRedis;
let sink: SmtpSink;
let queue: Queue<SendOtpJobData>;
const children: ChildProcess[] = [];
const output: string[] = [];

beforeAll(async () => {
  redis = createTestRedis();
  sink = await startSmtpSink({ delayMs: SMTP_DELAY_MS });
  queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
    connection: { url: redis.url },
    prefix: redis.bullmqPrefix,
  });
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await queue?.close();
  await sink?.close();
  await redis?.flush();
});

function startMailer(env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: mailerDir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      APP_ENV: 'production',
      LOG_LEVEL: 'info',
      REDIS_URL: redis.url,
      BULLMQ_PREFIX: redis.bullmqPrefix,
      SMTP_URL: sink.url,
      MAIL_FROM: 'Tessera <no-reply@tessera.test>',
      MAIL_JOB_KEY,
      MAILER_CONCURRENCY: String(CONCURRENCY),
      MAILER_METRICS_PORT: '0',
      MAILER_METRICS_HOST: '127.0.0.1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  children.push(child);
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return { child, exited };
}

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000) {
  for (const deadline = Date.now() + timeoutMs; !(await condition()); ) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${output.join('')}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

it('SIGTERM finishes the active jobs and exits 0; the next mailer sends the rest, each code once', async () => {
  const jobs = Array.from({ length: JOBS }, (_, i) => ({
    to: `user${i}@example.com`,
    code: String(4100 + i),
    jobId: sendOtpJobId(`00000000-0000-4000-8000-${String(i + 1).padStart(12, '0')}`),
  }));
  const expiresAt = new Date(Date.now() + 10 * 60_000).toISOString();
  const keys = parseMailJobKeys(MAIL_JOB_KEY);
  await queue.addBulk(
    jobs.map(({ to, code, jobId }) => ({
      name: SEND_OTP_JOB,
      data: { to, sealedCode: sealCode(code, to, keys), expiresAt },
      opts: { ...EMAIL_JOB_OPTIONS, jobId },
    })),
  );

  const first = startMailer();
  // Some delivered, and more waiting for the SMTP server's answer when the signal comes.
  await until(
    () => sink.messages.length >= CONCURRENCY && sink.inFlight() > 0,
    'the first emails, and more on their way',
  );
  const deliveredAtSignal = sink.messages.length;
  first.child.kill('SIGTERM');
  const exitCode = await first.exited;
  const deliveredAtExit = sink.messages.length;
  const left = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed');

  expect(exitCode, output.join('')).toBe(0);
  // The deliveries under way at SIGTERM were finished, not abandoned…
  expect(deliveredAtExit).toBeGreaterThan(deliveredAtSignal);
  expect(left.active).toBe(0);
  // …and no new ones were started: the process left work behind, all of it still queued.
  expect(left).toEqual({ waiting: JOBS - deliveredAtExit, active: 0, delayed: 0, failed: 0 });
  expect(left.waiting).toBeGreaterThan(0);
  console.info(
    `shutdown: ${deliveredAtSignal} delivered at SIGTERM, ${deliveredAtExit} at exit (code ${exitCode}), ${left.waiting} left waiting`,
  );

  const second = startMailer();
  await until(() => sink.messages.length >= JOBS, `all ${JOBS} emails`);
  await until(async () => (await queue.count()) + (await queue.getActiveCount()) === 0, 'an empty queue');
  second.child.kill('SIGTERM');
  expect(await second.exited).toBe(0);

  // Nothing is left that could still send: the count is final.
  expect(sink.messages).toHaveLength(JOBS);
  for (const { to, code } of jobs) {
    const received = sink.messages.filter((mail) => mail.to.includes(to));
    expect(
      received.map((mail) => mail.subject),
      to,
    ).toEqual([`${code} is your Tessera sign-in code`]);
  }
  expect(await queue.getJobCounts('failed', 'delayed')).toEqual({ failed: 0, delayed: 0 });
}, 40_000);

it('with Redis down, the queue gauges say NaN, and SIGTERM exits 0 at once instead of waiting out the drain deadline', async () => {
  const away = await startPrivateRedis();
  try {
    // A deadline that a shutdown waiting for Redis would reach within the test: it then exits 1.
    const from = output.length;
    const mailer = startMailer({ REDIS_URL: away.url, SHUTDOWN_TIMEOUT: '10' });
    await until(() => output.slice(from).join('').includes('"msg":"mailer ready"'), 'the mailer to be ready');
    const operations = /"operations":"([^"]+)"/.exec(output.slice(from).join(''))?.[1];
    const gauge = async (series: string) =>
      new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(
        await (await fetch(`${operations}/metrics`)).text(),
      )?.[1];
    const queueGauge = (state: string) => gauge(`tessera_email_queue_jobs{state="${state}"}`);
    expect(await queueGauge('waiting')).toBe('0');
    expect(await gauge('tessera_email_queue_oldest_waiting_seconds')).toBe('0');
    await away.stop();
    // Once the mailer sees Redis gone (its readiness says so), the signal comes.
    await until(
      async () => (await fetch(`${operations}/health/ready`)).status === 503,
      'Redis reported down',
    );
    // The queue's size is unknown now, not the last one read.
    expect(await queueGauge('waiting')).toBe('NaN');
    expect(await gauge('tessera_email_queue_oldest_waiting_seconds')).toBe('NaN');
    mailer.child.kill('SIGTERM');

    expect(await mailer.exited, output.join('')).toBe(0);
  } finally {
    await away.remove();
  }
}, 30_000);

it('says it is ready only once Redis answers, when it starts before Redis, and tells the outage once', async () => {
  const late = await startPrivateRedis();
  try {
    await late.stop();
    const from = output.length;
    const log = () => output.slice(from).join('');
    const mailer = startMailer({ REDIS_URL: late.url });
    await until(() => log().includes('"msg":"mailer started"'), 'the mailer to start');
    // The sink's certificate is its own: this file's SMTP_URL takes it unchecked, which production warns of.
    expect(
      log().match(/"level":40,[^\n]*turns off the check of the SMTP server's certificate/g),
    ).toHaveLength(1);
    const operations = /"operations":"([^"]+)"/.exec(log())?.[1];
    expect((await fetch(`${operations}/health/ready`)).status).toBe(503);
    expect(log()).not.toContain('mailer ready');

    await late.start();
    await until(() => log().includes('"msg":"mailer ready"'), 'the mailer to be ready');
    await until(async () => (await fetch(`${operations}/health/ready`)).status === 200, 'readiness');
    // The outage is told once, and its end, not each of the reconnection attempts in between.
    await until(() => log().includes('"msg":"Redis connection is back"'), 'the end of the outage');
    expect(log().match(/"msg":"Redis connection error"/g)).toHaveLength(1);
    await stopsCleanly({ mailer, log });
  } finally {
    await late.remove();
  }
}, 30_000);

/** A mailer whose Redis connections go through a proxy of the test's, ready, with its log since it started. */
async function mailerBehind(proxy: TcpProxy) {
  const from = output.length;
  const log = () => output.slice(from).join('');
  const mailer = startMailer({ REDIS_URL: proxy.through(redis.url) });
  await until(() => log().includes('"msg":"mailer ready"'), 'the mailer to be ready');
  // The worker's connection, its blocking one, and the queue's probe.
  await until(() => proxy.connections() >= 3, 'the mailer to open its connections');
  return { mailer, log };
}

/** Queues a code email to `to`, valid for a code's lifetime (OTP_TTL). */
function queueCode(to: string, code: string) {
  const keys = parseMailJobKeys(MAIL_JOB_KEY);
  const expiresAt = new Date(Date.now() + 300_000).toISOString();
  return queue.add(
    SEND_OTP_JOB,
    { to, sealedCode: sealCode(code, to, keys), expiresAt },
    { ...EMAIL_JOB_OPTIONS, jobId: sendOtpJobId(`00000000-0000-4000-8000-00000000${code}`) },
  );
}

/** Queues a code email to `to` and waits until the SMTP sink has it. */
async function delivered(to: string, code: string, what: string, timeoutMs?: number) {
  await queueCode(to, code);
  await until(() => sink.messages.some((mail) => mail.to.includes(to)), what, timeoutMs);
}

/** SIGTERM: the mailer exits 0, having logged no error. */
async function stopsCleanly({ mailer, log }: { mailer: ReturnType<typeof startMailer>; log: () => string }) {
  expect(log()).not.toContain('"level":50');
  mailer.child.kill('SIGTERM');
  expect(await mailer.exited, log()).toBe(0);
}

it('takes a reset of its Redis connections for a short outage: one warning and its end, no error, and it sends on', async () => {
  // The connections reset (RST), as a load balancer or a crashed server's host does, while Redis runs on.
  const proxy = await startTcpProxy(redis.url);
  try {
    const { mailer, log } = await mailerBehind(proxy);
    proxy.reset();
    await until(() => log().includes('"msg":"Redis connection is back"'), 'the end of the outage');

    await delivered('after.reset@example.com', '4242', 'the email queued after the reset');

    expect(log().match(/"msg":"Redis connection error"/g)).toHaveLength(1);
    await stopsCleanly({ mailer, log });
  } finally {
    await proxy.close();
  }
}, 30_000);

it('takes its Redis connections dropped without a word (a NAT that forgot them): it says so, connects again and sends', async () => {
  const proxy = await startTcpProxy(redis.url);
  try {
    const { mailer, log } = await mailerBehind(proxy);
    // Idle: its blocking connection waits for a job (BZPOPMIN), its set-up done.
    const clients = new Redis(redis.url);
    try {
      await until(
        async () =>
          String(await clients.call('CLIENT', 'LIST'))
            .split('\n')
            .some((client) => client.includes(redis.bullmqPrefix) && client.includes('cmd=bzpopmin')),
        'the mailer to wait for jobs',
      );
    } finally {
      clients.disconnect();
    }
    proxy.abandon();

    // Its commands go unanswered twice, 10 s each, a retry's 15 s apart: sent within about a minute
    // (BullMQ's blocking connection, which took the job's wake-up with it, it replaces itself).
    await delivered('after.abandon@example.com', '4343', 'the email queued after the drop', 90_000);

    // Told as the connection's trouble, at warn: no error, no stack of a failed job.
    const warnings = log()
      .split('\n')
      .filter((line) => line.includes('"msg":"Redis connection error"'))
      .map((line) => JSON.parse(line).err.message);
    expect(warnings).toContainEqual(
      expect.stringMatching(/^no answer to commands for \d+ s: connecting again$/),
    );
    expect(log()).toContain('"msg":"Redis connection is back"');
    await stopsCleanly({ mailer, log });
  } finally {
    await proxy.close();
  }
}, 120_000);

// What a connection's client sent, case-folded (RESP: a command's name is a bulk string of its own).
const count = (sent: string, command: string) => sent.split(`\r\n${command}\r\n`).length - 1;
/** The first connection that `when` holds for, alone: the ones made after it pass. */
function first(when: (sent: string, rank: number) => boolean) {
  let dropped = false;
  return (sent: string, rank: number) => {
    if (dropped || !when(sent, rank)) return false;
    dropped = true;
    return true;
  };
}

it('takes its blocking connection lost in its set-up (no watchdog of BullMQ runs yet): connects it again and sends', async () => {
  const proxy = await startTcpProxy(redis.url);
  try {
    const { mailer, log } = await mailerBehind(proxy);
    // Its connections reset; the blocking one's next, the only one that names itself, is lost once
    // it sent CLIENT SETNAME: it waited for good behind such a proxy, ~15 minutes behind a NAT.
    proxy.abandonWhen(first((sent) => sent.includes('\r\nsetname\r\n') && count(sent, 'bzpopmin') === 0));
    proxy.reset();
    await until(() => log().includes('"msg":"Redis connection is back"'), 'the end of the outage');

    // Its silence ends it after 20 s, and it is made again.
    await delivered('after.setup.lost@example.com', '4444', 'the email queued after the loss', 60_000);
    // Said at warn, for the operator whose proxy or NAT loses connections.
    expect(log()).toMatch(
      /"level":40,[^\n]*"msg":"BullMQ's blocking Redis connection answered nothing for 20 s: connecting again"/,
    );
    await stopsCleanly({ mailer, log });
  } finally {
    await proxy.close();
  }
}, 120_000);

it("stops, saying why, when its worker connection is lost at BullMQ's set-up, which BullMQ does not make again", async () => {
  const proxy = await startTcpProxy(redis.url);
  try {
    // The worker's connection is the mailer's first; its second INFO is BullMQ's version check.
    proxy.abandonWhen(first((sent, rank) => rank === 0 && count(sent, 'info') >= 2));
    const from = output.length;
    const mailer = startMailer({ REDIS_URL: proxy.through(redis.url) });
    // It took no job, for good, while it said it was ready: now it exits, for a start to mend it.
    expect(await mailer.exited).toBe(1);
    expect(output.slice(from).join('')).toMatch(
      /"level":60,[^\n]*"msg":"BullMQ could not set up the worker's Redis connection/,
    );
  } finally {
    await proxy.close();
  }
}, 60_000);
