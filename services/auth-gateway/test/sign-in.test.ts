import { createHash } from 'node:crypto';
import {
  codesKey,
  EMAIL_BACKOFF,
  EMAIL_QUEUE,
  openCode,
  SEND_OTP_JOB,
  type SendOtpJobData,
} from '@tessera/contracts';
import { mentionsCode } from '@tessera/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ageRedis, body, post, startGateway, type TestGateway } from './helpers.ts';

const SEND = '/api/v1/auth/send-otp-email';
const VERIFY = '/api/v1/auth/verify-otp-email';

let gateway: TestGateway;
let queue: Queue<SendOtpJobData>;
let redis: Redis;
beforeAll(async () => {
  gateway = await startGateway({ TRUST_PROXY: 'true' });
  queue = new Queue(EMAIL_QUEUE, {
    connection: { url: gateway.config.redis.url },
    prefix: gateway.config.mail.queuePrefix,
  });
  redis = new Redis(gateway.config.redis.url);
});
afterAll(async () => {
  await queue.close();
  await redis.quit();
  await gateway.close();
});

const send = async (email: string) => body(await post(gateway.app, SEND, { email })).data;
const verify = (email: string, code: string, headers: Record<string, string> = {}) =>
  post(gateway.app, VERIFY, { email, code }, headers);
const wrongCode = (code: string) => String((Number(code) + 1) % 10_000).padStart(4, '0');

async function redisEntries(): Promise<string> {
  const keys = await redis.keys(`${gateway.config.redis.keyPrefix}*`);
  const values = await Promise.all(
    keys.map(async (key) =>
      (await redis.type(key)) === 'hash' ? JSON.stringify(await redis.hgetall(key)) : '',
    ),
  );
  return [...keys, ...values].join('\n');
}

describe('POST /api/v1/auth/send-otp-email', () => {
  it('issues a 4-digit code, enqueues its email and keeps only a keyed hash of it', async () => {
    const data = await send('Carol@Example.com');
    expect(data).toEqual({
      email: 'carol@example.com',
      expiresIn: 300,
      resendIn: 0,
      code: expect.any(String),
    });
    expect(data.code).toMatch(/^\d{4}$/);

    const jobs = (await queue.getWaiting()).filter((job) => job.data.to === 'carol@example.com');
    expect(jobs).toHaveLength(1);
    const [job] = jobs;
    expect(job?.name).toBe(SEND_OTP_JOB);
    expect(job?.id).toMatch(/^otp-[0-9a-f-]{36}$/);
    // Sealed for the mailer: the job in Redis holds no code in clear.
    expect(job?.data).not.toHaveProperty('code');
    expect(mentionsCode(JSON.stringify(job?.data), data.code)).toBe(false);
    expect(openCode(job?.data.sealedCode ?? '', 'carol@example.com', gateway.config.mail.jobKeys)).toBe(
      data.code,
    );
    expect(Date.parse(job?.data.expiresAt ?? '') - Date.now()).toBeGreaterThan(290_000);
    // The mailer retries it until the code expires, with its backoff strategy.
    expect(job?.opts).toMatchObject({ backoff: { type: EMAIL_BACKOFF } });

    const stored = await redisEntries();
    expect(stored).not.toContain('carol@example.com');
    expect(mentionsCode(stored, data.code)).toBe(false);
    // The stored code goes when the code expires.
    const codeKeys = await redis.keys(`${gateway.config.redis.keyPrefix}{email:*}:otp`);
    const ttls = await Promise.all(codeKeys.map((key) => redis.ttl(key)));
    expect(ttls.length).toBeGreaterThan(0);
    for (const ttl of ttls) {
      expect(ttl).toBeGreaterThan(290);
      expect(ttl).toBeLessThanOrEqual(300);
    }
  });

  it('gives each code its own job id, so a resend is a new email', async () => {
    await send('dave@example.com');
    await send('dave@example.com');
    const jobs = (await queue.getWaiting()).filter((job) => job.data.to === 'dave@example.com');
    expect(new Set(jobs.map((job) => job.id)).size).toBe(2);
  });

  it("records each code as its address's newest, under a series only the gateways can compute", async () => {
    const waitingTo = async (email: string) =>
      (await queue.getWaiting()).filter((job) => job.data.to === email);
    await send('series@example.com');
    const [older] = await waitingTo('series@example.com');
    await send('series@example.com');
    const newer = (await waitingTo('series@example.com')).find((job) => job.id !== older?.id);
    const series = newer?.data.series ?? '';
    expect(series).toMatch(/^[0-9a-f]{64}$/);
    expect(older?.data.series).toBe(series);
    await send('other.series@example.com');
    const [other] = await waitingTo('other.series@example.com');
    expect(other?.data.series).toMatch(/^[0-9a-f]{64}$/);
    expect(other?.data.series).not.toBe(series);
    // Keyed: not the address's plain hash, which anyone could compute from a list of addresses.
    expect(series).not.toBe(createHash('sha256').update('series@example.com').digest('hex'));

    const record = codesKey(gateway.config.mail.queuePrefix, series);
    const { newest, ...records } = await redis.hgetall(record);
    expect(newest).toBe(newer?.id);
    expect(Object.keys(records).sort()).toEqual([older?.id, newer?.id].sort());
    // Each record tells when it expires: the job's queueing, the code's lifetime and a minute.
    for (const job of [older, newer]) {
      const keptMs = Number(records[job?.id ?? '']) - (job?.timestamp ?? 0);
      expect(keptMs).toBeGreaterThanOrEqual(360_000);
      expect(keptMs).toBeLessThan(420_000);
    }
    // Kept for the code's lifetime (300 s) and a minute's margin, no longer.
    const ttl = await redis.pttl(record);
    expect(ttl).toBeGreaterThan(300_000);
    expect(ttl).toBeLessThanOrEqual(360_000);
  });

  it('answers alike for known and unknown emails', async () => {
    const known = 'known@example.com';
    await verify(known, (await send(known)).code);
    const forKnown = await send(known);
    const forUnknown = await send('unknown@example.com');
    expect(Object.keys(forKnown)).toEqual(Object.keys(forUnknown));
    expect({ ...forKnown, email: '', code: '' }).toEqual({ ...forUnknown, email: '', code: '' });
  });
});

describe('the email address', () => {
  const refusal = async (email: string, url = SEND) => {
    const response = await post(gateway.app, url, { email, code: '1234' });
    expect(response.statusCode).toBe(400);
    return body(response).errors;
  };
  const queuedTo = async (email: string) =>
    (await queue.getWaiting()).filter((job) => job.data.to === email).length;

  it.each([
    [`${'a'.repeat(65)}@example.com`, 'body.email has more than 64 characters before the @'],
    [`a@${'b'.repeat(64)}.example.com`, 'body.email has a domain label of more than 63 characters'],
    [
      'foo@example.123',
      'body.email must end in a domain name: an all-numeric top-level domain or an IP address receives no mail',
    ],
    [
      'foo@123.45.67.89',
      'body.email must end in a domain name: an all-numeric top-level domain or an IP address receives no mail',
    ],
    ['Deleted-0@Tombstone.INVALID', 'body.email is in the .invalid domain, which never receives mail'],
    ['jörg@example.de', 'body.email is refused: non-ASCII characters before the @ are not supported'],
    [
      'ana@XN--ZZ.de',
      'body.email has a domain label that is no internationalized name (an `xn--` label that does not decode to one)',
    ],
  ])('refuses %s, saying why, and queues no email', async (email, detail) => {
    expect(await refusal(email)).toEqual(['Validation failed', detail]);
    expect(await queuedTo(email.toLowerCase())).toBe(0);
  });

  it('still takes such an address to verify-otp-email: an account made before these rules signs in', async () => {
    const response = await post(gateway.app, VERIFY, {
      email: `${'a'.repeat(65)}@example.com`,
      code: '1234',
    });
    expect(response.statusCode).toBe(404);
    expect(body(response).errors).toEqual([
      'Resource not found',
      'No active code for this email; request a new one',
    ]);
  });

  it('keeps taking the addresses development and tests use', async () => {
    const local = `${'a'.repeat(64)}@${'b'.repeat(63)}.example.com`;
    for (const email of ['dev@app.test', 'dev@app.localhost', 'dev@mail.example', 'dev@example.com', local]) {
      expect((await send(email)).email).toBe(email);
    }
  });

  it('takes a Unicode domain in its ASCII form: both spellings are one account and one code', async () => {
    const sent = await send(' Ute@Bücher.DE ');
    expect(sent.email).toBe('ute@xn--bcher-kva.de');
    expect(await queuedTo('ute@xn--bcher-kva.de')).toBe(1);
    const first = await verify('ute@xn--bcher-kva.de', sent.code);
    expect(first.statusCode).toBe(200);
    expect(body(first).data.user.email).toBe('ute@xn--bcher-kva.de');

    const again = await send('ute@xn--bcher-kva.de');
    const second = await verify('ute@bücher.de', again.code);
    expect(second.statusCode).toBe(200);
    expect(body(second).data.user._id).toBe(body(first).data.user._id);
  });
});

describe('POST /api/v1/auth/verify-otp-email', () => {
  it('signs a new user in, creating the user with every field of the specification', async () => {
    const { code } = await send('erin@example.com');
    const response = await verify('ERIN@example.com ', code);
    expect(response.statusCode).toBe(200);
    const data = body(response).data;
    expect(data).toMatchObject({
      expiresIn: 3600,
      refreshExpiresIn: 2_592_000,
      isRegistrationComplete: false,
    });
    expect(data.accessToken.split('.')).toHaveLength(3);
    expect(data.refreshToken).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(Object.keys(data.user)).toHaveLength(43);
    expect(data.user).toMatchObject({
      email: 'erin@example.com',
      roles: ['user'],
      isRegistrationComplete: false,
      name: null,
      interests: [],
      followersCount: 0,
      creditBalance: 0,
      privacyPolicyAccepted: false,
      accountDeletionRequestedAt: null,
    });
    expect(data.user._id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(data.user.lastLogin)).not.toBeNaN();
  });

  it('signs the same user in again with a new session', async () => {
    const first = body(await verify('frank@example.com', (await send('frank@example.com')).code)).data;
    const second = body(await verify('frank@example.com', (await send('frank@example.com')).code)).data;
    expect(second.user._id).toBe(first.user._id);
    const sessions = await gateway.app.db
      .selectFrom('sessions')
      .select('id')
      .where('userId', '=', first.user._id)
      .execute();
    expect(sessions).toHaveLength(2);
  });

  it('records the client IP (from X-Forwarded-For behind a trusted proxy) and user agent on the session', async () => {
    const { code } = await send('grace@example.com');
    const response = await verify('grace@example.com', code, {
      'x-forwarded-for': '203.0.113.7',
      'user-agent': 'TesseraTest/1.0',
    });
    const session = await gateway.app.db
      .selectFrom('sessions')
      .select(['ipAddress', 'userAgent'])
      .where('userId', '=', body(response).data.user._id)
      .executeTakeFirstOrThrow();
    expect(session).toEqual({ ipAddress: '203.0.113.7', userAgent: 'TesseraTest/1.0' });
  });

  it('answers a wrong code with 400 "Invalid code"', async () => {
    const { code } = await send('heidi@example.com');
    const response = await verify('heidi@example.com', wrongCode(code));
    expect(response.statusCode).toBe(400);
    expect(body(response).errors.slice(0, 2)).toEqual(['Validation failed', 'Invalid code']);
  });

  it('answers 404 when no code was sent, and after the code was used', async () => {
    expect((await verify('nobody@example.com', '1234')).statusCode).toBe(404);
    const { code } = await send('ivan@example.com');
    expect((await verify('ivan@example.com', code)).statusCode).toBe(200);
    const reused = await verify('ivan@example.com', code);
    expect(reused.statusCode).toBe(404);
    expect(body(reused).errors[0]).toBe('Resource not found');
  });

  it('locks the code after 5 wrong guesses: the 5th is 400, then even the right code is 409 until a new one', async () => {
    const { code } = await send('judy@example.com');
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect((await verify('judy@example.com', wrongCode(code))).statusCode).toBe(400);
    }
    const locked = await verify('judy@example.com', code);
    expect(locked.statusCode).toBe(409);
    expect(body(locked).errors[0]).toBe('Resource already exists or cannot be changed in its current state');

    const fresh = await send('judy@example.com');
    expect((await verify('judy@example.com', fresh.code)).statusCode).toBe(200);
  });

  it('a new code replaces the previous one', async () => {
    const first = await send('ken@example.com');
    const second = await send('ken@example.com');
    if (first.code !== second.code)
      expect((await verify('ken@example.com', first.code)).statusCode).toBe(400);
    expect((await verify('ken@example.com', second.code)).statusCode).toBe(200);
  });

  it('is single use under concurrency: 10 simultaneous verifications, exactly one 200', async () => {
    const { code } = await send('laura@example.com');
    const responses = await Promise.all(Array.from({ length: 10 }, () => verify('laura@example.com', code)));
    const statuses = responses.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([200, ...Array(9).fill(404)]);
    const user = await gateway.app.db
      .selectFrom('users')
      .select('id')
      .where('email', '=', 'laura@example.com')
      .execute();
    const sessions = await gateway.app.db
      .selectFrom('sessions')
      .select('id')
      .where('userId', '=', user[0]?.id ?? '')
      .execute();
    expect(sessions).toHaveLength(1);
  });

  it('counts attempts atomically: 12 simultaneous wrong guesses, exactly 5 evaluated', async () => {
    const { code } = await send('mallory@example.com');
    const responses = await Promise.all(
      Array.from({ length: 12 }, () => verify('mallory@example.com', wrongCode(code))),
    );
    const statuses = responses.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([...Array(5).fill(400), ...Array(7).fill(409)]);
  });

  it('gives an accepted code back as it was when its session cannot be made: no longer life, no fresh attempts', async () => {
    const email = 'olga@example.com';
    const { code } = await send(email);
    expect(body(await verify(email, wrongCode(code))).errors[2]).toBe('4 attempt(s) left for this code');
    await ageRedis(gateway, 290);
    // Postgres refuses every new session for a while.
    const db = new pg.Client({ connectionString: gateway.config.database.url });
    await db.connect();
    try {
      await db.query('alter table sessions add constraint refuse_all check (false) not valid');
      expect((await verify(email, code)).statusCode).toBeGreaterThanOrEqual(500);
    } finally {
      await db.query('alter table sessions drop constraint if exists refuse_all');
      await db.end();
    }

    expect(body(await verify(email, wrongCode(code))).errors[2]).toBe('3 attempt(s) left for this code');
    // The 300 s the code had when it was sent are over: it is gone, as it would have been.
    await ageRedis(gateway, 11);
    expect((await verify(email, code)).statusCode).toBe(404);
  });

  it('rejects a code that is not 4 digits', async () => {
    for (const code of ['123', '12345', 'abcd', ' 1234']) {
      const response = await verify('nina@example.com', code);
      expect(response.statusCode).toBe(400);
      expect(body(response).errors[1]).toMatch(/^body\.code /);
    }
  });
});

describe('when the code email cannot be queued', () => {
  it('answers 503 without burning the resend cooldown, and the next try is sent', async () => {
    const strict = await startGateway({ OTP_RESEND_COOLDOWN: '60' });
    try {
      const email = 'queue-down@example.com';
      // The queue's own Redis connection drops (the gateway's other connection stays up).
      const connection = strict.app.mailQueue.opts.connection as Redis;
      connection.disconnect();
      const failed = await post(strict.app, SEND, { email });
      expect(failed.statusCode).toBe(503);
      expect(body(failed).errors).toEqual(['Service unavailable']);
      expect(failed.headers['retry-after']).toBe('5');

      await connection.connect();
      const retried = await post(strict.app, SEND, { email });
      expect(retried.statusCode).toBe(200);
      // The cooldown counts the send that happened, not the one that failed.
      expect((await post(strict.app, SEND, { email })).statusCode).toBe(429);
    } finally {
      await strict.close();
    }
  });
});
