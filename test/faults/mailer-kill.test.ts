import { EMAIL_QUEUE } from '@tessera/contracts';
import {
  createTestDatabase,
  createTestRedis,
  type SmtpSink,
  startSmtpSink,
  type TestDatabase,
  type TestRedis,
  waitUntil,
} from '@tessera/testing';
import { Queue, QueueEvents } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTessera, type Tessera } from './tessera.ts';

// Two mailers share a burst of code emails; one is killed with SIGKILL while every send of both is
// waiting for the SMTP server's answer. The other takes over the killed one's jobs once their locks
// run out: every code is emailed, and only those whose answer the killed mailer never heard twice.

const LOCK_MS = 2000;
const STALLED_INTERVAL_MS = 1000;
const CONCURRENCY = 3;
const SMTP_DELAY_MS = 500;
const PEOPLE = Array.from({ length: 30 }, (_, i) => `burst.${i}@example.com`);

let redis: TestRedis;
let database: TestDatabase;
let sink: SmtpSink;
let tessera: Tessera;
let queue: Queue;
let events: QueueEvents;

beforeAll(async () => {
  redis = createTestRedis();
  [database, sink] = await Promise.all([createTestDatabase(), startSmtpSink({ delayMs: SMTP_DELAY_MS })]);
  tessera = await startTessera(
    {
      databaseUrl: database.url,
      redisUrl: redis.url,
      keyPrefix: redis.keyPrefix,
      bullmqPrefix: redis.bullmqPrefix,
      sink,
    },
    {
      MAILER_CONCURRENCY: String(CONCURRENCY),
      MAILER_LOCK_DURATION_MS: String(LOCK_MS),
      MAILER_STALLED_INTERVAL_MS: String(STALLED_INTERVAL_MS),
      OTP_MAX_SENDS_PER_IP_PER_HOUR: '1000',
    },
  );
  queue = new Queue(EMAIL_QUEUE, { connection: { url: redis.url }, prefix: redis.bullmqPrefix });
  events = new QueueEvents(EMAIL_QUEUE, { connection: { url: redis.url }, prefix: redis.bullmqPrefix });
  await events.waitUntilReady();
});

afterAll(async () => {
  await tessera?.stop();
  await events?.close();
  await queue?.close();
  await Promise.all([database?.drop(), sink?.close(), redis?.flush()]);
});

it('SIGKILL of a mailer mid-burst: its jobs are taken over, every code emailed, only those it was sending twice', {
  timeout: 30_000,
}, async () => {
  const killed = tessera.startMailer();
  const survivor = tessera.startMailer();
  // Queued jobs of the killed mailer come back to the wait list as stalled: when, and for whom.
  const stalled: Array<{ at: number; to: Promise<string> }> = [];
  events.on('stalled', ({ jobId }) => {
    stalled.push({ at: Date.now(), to: queue.getJob(jobId).then((job) => String(job?.data.to)) });
  });
  // Events arrive in the order they happened: a stall before the job's completion.
  const completed = new Set<string>();
  events.on('completed', ({ jobId }) => completed.add(jobId));

  const sent = await Promise.all(
    PEOPLE.map((email) => tessera.call('POST', '/api/v1/auth/send-otp-email', { email })),
  );
  expect(sent.map(({ status }) => status)).toEqual(PEOPLE.map(() => 200));
  // Every slot of both mailers waits for SMTP's answer: none is between an acceptance and its record.
  await waitUntil(
    'both mailers sending',
    () => sink.messages.length >= 2 * CONCURRENCY && sink.inFlight() === 2 * CONCURRENCY,
  );
  await killed.stop('SIGKILL');
  const killedAt = Date.now();

  const emailed = (email: string) => sink.messages.filter((mail) => mail.to.includes(email)).length;
  await waitUntil('every job completed', () => completed.size === PEOPLE.length, 20_000);
  const recovered = await Promise.all(stalled.map(async ({ at, to }) => ({ at, to: await to })));

  // The killed mailer's sends were taken over (each of its slots held one), and nothing is left that
  // could be sent again.
  expect(recovered).toHaveLength(CONCURRENCY);
  expect(await queue.getJobCounts('waiting', 'active', 'delayed', 'failed')).toEqual({
    waiting: 0,
    active: 0,
    delayed: 0,
    failed: 0,
  });
  // The server had taken the messages the killed mailer was waiting on: those went out again.
  const resent = new Set(recovered.map(({ to }) => to));
  for (const email of PEOPLE) expect(emailed(email), email).toBe(resent.has(email) ? 2 : 1);
  // Both copies are one message to a receiver: one Message-ID, the job's.
  for (const email of resent) {
    const ids = sink.messages
      .filter((mail) => mail.to.includes(email))
      .map((mail) => mail.headers['message-id']);
    expect(new Set(ids).size, email).toBe(1);
  }
  console.info(
    `mailer SIGKILL: ${recovered.length} jobs taken over after ${recovered.map(({ at }) => at - killedAt).join(', ')} ms`,
  );
  await survivor.stop('SIGTERM');
});

it('a job whose mailer is killed, and then the next one too, is still emailed', {
  timeout: 30_000,
}, async () => {
  const email = 'twice.stalled@example.com';
  const stalls: string[] = [];
  events.on('stalled', ({ jobId }) => stalls.push(jobId));
  const emailed = () => sink.messages.filter((mail) => mail.to.includes(email)).length;

  // Each mailer is killed while the SMTP server holds its answer (a message counts once answered):
  // the job stalls, twice.
  const first = tessera.startMailer();
  expect((await tessera.call('POST', '/api/v1/auth/send-otp-email', { email })).status).toBe(200);
  await waitUntil('the first mailer sending', () => sink.inFlight() === 1);
  await first.stop('SIGKILL');
  const second = tessera.startMailer();
  await waitUntil('the second mailer sending', () => emailed() === 1 && sink.inFlight() === 1, 15_000);
  await second.stop('SIGKILL');
  const third = tessera.startMailer();

  const [jobId] = stalls;
  // Done: completed (and removed at once), or failed for good.
  const done = async () => ['unknown', 'failed'].includes(await queue.getJobState(jobId ?? ''));
  await waitUntil('the job done', done, 15_000);
  expect(stalls).toEqual([jobId, jobId]);
  expect(await queue.getJobCounts('failed')).toEqual({ failed: 0 });
  // Its third send was the one answered: each was the same message.
  expect(emailed()).toBe(3);
  const ids = sink.messages
    .filter((mail) => mail.to.includes(email))
    .map((mail) => mail.headers['message-id']);
  expect(new Set(ids).size).toBe(1);
  // Each stall is told by the mailer that took the job back (and counted, outcome "stalled").
  const told = [first, second, third].map((mailer) => mailer.output()).join('');
  expect(told.split('email job taken back from a mailer that stopped').length - 1).toBe(2);
});
