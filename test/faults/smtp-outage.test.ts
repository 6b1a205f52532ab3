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
import { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTessera, type Tessera } from './tessera.ts';

// The SMTP server refuses every message (451) for longer than the whole retry budget once was
// (5 attempts, ~15 s), while people keep asking for codes. Once it accepts again, every code still
// valid is emailed, each once.

const OUTAGE_MS = 17_000;
const PEOPLE = Array.from({ length: 8 }, (_, i) => `waiting.${i}@example.com`);

let redis: TestRedis;
let database: TestDatabase;
let sink: SmtpSink;
let tessera: Tessera;

beforeAll(async () => {
  redis = createTestRedis();
  [database, sink] = await Promise.all([createTestDatabase(), startSmtpSink()]);
  tessera = await startTessera({
    databaseUrl: database.url,
    redisUrl: redis.url,
    keyPrefix: redis.keyPrefix,
    bullmqPrefix: redis.bullmqPrefix,
    sink,
  });
  tessera.startMailer();
});

afterAll(async () => {
  await tessera?.stop();
  await Promise.all([database?.drop(), sink?.close(), redis?.flush()]);
});

it('emails every code asked for during an SMTP outage longer than the old retry budget, each once', {
  timeout: 90_000,
}, async () => {
  sink.failNext(Number.MAX_SAFE_INTEGER);
  const outageEnds = Date.now() + OUTAGE_MS;
  // Asked for one after another through the outage.
  for (const email of PEOPLE) {
    expect((await tessera.call('POST', '/api/v1/auth/send-otp-email', { email })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS / PEOPLE.length / 2));
  }
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, outageEnds - Date.now())));
  expect(sink.messages).toEqual([]);
  sink.failNext(0);

  const emailed = (email: string) => sink.messages.filter((mail) => mail.to.includes(email)).length;
  // The retries back off to 15 s at most: every code is sent within one more interval.
  await waitUntil('every code emailed', () => PEOPLE.every((email) => emailed(email) > 0), 30_000).catch(
    () => {
      expect(
        PEOPLE.filter((email) => emailed(email) === 0),
        'codes never emailed',
      ).toEqual([]);
    },
  );
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect(PEOPLE.map(emailed)).toEqual(PEOPLE.map(() => 1));
});

it('emails only the newest code to someone who asked again during the outage, the one that works', {
  timeout: 60_000,
}, async () => {
  const email = 'asked.twice@example.com';
  const send = () => tessera.call('POST', '/api/v1/auth/send-otp-email', { email });
  const queue = new Queue(EMAIL_QUEUE, { connection: { url: redis.url }, prefix: redis.bullmqPrefix });
  try {
    sink.failNext(Number.MAX_SAFE_INTEGER);
    expect((await send()).status).toBe(200);
    // The first code's email met the outage and waits for its retry when its reader asks again.
    await waitUntil('the first email refused', async () => (await queue.getDelayedCount()) === 1);
    expect((await send()).status).toBe(200);
    // Both waiting for their retry: the first is next tried after the second was recorded.
    await waitUntil('the second email refused', async () => (await queue.getDelayedCount()) === 2);
    sink.failNext(0);
    const emailed = () => sink.messages.filter((mail) => mail.to.includes(email));
    await waitUntil('an email delivered', () => emailed().length > 0, 30_000);
    // The counts in one read: three reads may each miss a job moving from one state to the next.
    const unfinished = async () => {
      const {
        waiting = 0,
        active = 0,
        delayed = 0,
      } = await queue.getJobCounts('waiting', 'active', 'delayed');
      return waiting + active + delayed;
    };
    await waitUntil('both emails done', async () => (await unfinished()) === 0, 30_000);
  } finally {
    await queue.close();
  }
  // The first email, sent after the second, would have been the last in the inbox, with a dead code.
  const emails = sink.messages.filter((mail) => mail.to.includes(email));
  expect(emails).toHaveLength(1);
  const code = /\b(\d{4})\b/.exec(emails[0]?.subject ?? '')?.[1];
  expect((await tessera.call('POST', '/api/v1/auth/verify-otp-email', { email, code })).status).toBe(200);
});
