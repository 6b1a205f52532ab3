import { variablesOf } from '@tessera/config';
import { type PrivateRedis, startPrivateRedis } from '@tessera/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { GatewayConfigSchema } from '../src/config.ts';
import {
  ageRedis,
  body,
  GENEROUS_LIMITS,
  type Json,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

const SEND = '/api/v1/auth/send-otp-email';
const VERIFY = '/api/v1/auth/verify-otp-email';
const HOUR = 3600;
const DAY = 24 * HOUR;

// The limits exactly as configured out of the box (API.md §7).
const DEFAULT_LIMITS = Object.fromEntries(
  variablesOf(GatewayConfigSchema)
    .filter(({ name }) => name in GENEROUS_LIMITS)
    .map(({ name, schema }) => [name, String(schema.default)]),
);

// The tests that let time pass age every key of their gateway (ageRedis), a scan of the whole Redis:
// on a shared Redis holding many keys it takes long enough for real seconds to count as well. They
// run on a redis-server of this file's own.
let ownRedis: PrivateRedis;
beforeAll(async () => {
  ownRedis = await startPrivateRedis();
});
afterAll(() => ownRedis.remove());
const withDefaultLimits = () => startGateway({ ...DEFAULT_LIMITS, REDIS_URL: ownRedis.url });

const wrongCode = (code: string) => String((Number(code) + 1) % 10_000).padStart(4, '0');
const from = (ip: string) => ({ remoteAddress: ip });

type Gateway = TestGateway['app'];
const send = (app: Gateway, email: string, ip = '203.0.113.1') =>
  app.inject({ method: 'POST', url: SEND, payload: { email }, ...from(ip) });
const verify = (app: Gateway, email: string, code: string, ip = '203.0.113.1') =>
  app.inject({ method: 'POST', url: VERIFY, payload: { email, code }, ...from(ip) });

/** A 429 as API.md §3 and §7 describe it; returns its Retry-After in seconds. */
function expectTooMany(response: Awaited<ReturnType<typeof send>>): number {
  expect(response.statusCode).toBe(429);
  const envelope = body(response);
  expect(envelope).toMatchObject({ isSuccess: false, statusCode: 429, data: null });
  expect(envelope.errors[0]).toBe('Too many requests');
  const retryAfter = Number(response.headers['retry-after']);
  expect(Number.isInteger(retryAfter) && retryAfter > 0).toBe(true);
  expect(envelope.errors.at(-1)).toBe(`Try again in ${retryAfter} seconds`);
  return retryAfter;
}

/** The Redis server's clock (ms), which the windows count by: real time moves it, ageing does not. */
async function redisNow(gateway: TestGateway): Promise<number> {
  const [seconds, micros] = await gateway.app.redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * A 429 whose Retry-After is `seconds`, less the whole seconds of real time gone by since `since`
 * (redisNow before the request that started the wait): exact when the steps took under a second.
 */
async function expectRetryAfter(
  gateway: TestGateway,
  response: Awaited<ReturnType<typeof send>>,
  seconds: number,
  since: number,
): Promise<number> {
  const elapsed = Math.floor(((await redisNow(gateway)) - since) / 1000);
  const retryAfter = expectTooMany(response);
  expect(retryAfter).toBeLessThanOrEqual(seconds);
  expect(retryAfter).toBeGreaterThanOrEqual(seconds - elapsed);
  return retryAfter;
}

const statuses = (responses: { statusCode: number }[]) =>
  responses.reduce<Record<number, number>>((counts, r) => {
    counts[r.statusCode] = (counts[r.statusCode] ?? 0) + 1;
    return counts;
  }, {});

describe('a send whose code Redis could not store', () => {
  it('counts against no limit: the next send to the address is accepted', async () => {
    const gateway = await withDefaultLimits();
    const admin = new Redis(ownRedis.url);
    const everyKey = () => admin.call('ACL', 'SETUSER', 'default', 'resetkeys', '~*');
    try {
      // Redis refuses to write the code (its key ends in "otp") once the send has been counted.
      await admin.call('ACL', 'SETUSER', 'default', 'resetkeys', '~*[^p]');
      const failed = await send(gateway.app, 'lost@example.com');
      expect(failed.statusCode).not.toBe(200);
      await everyKey();

      expect((await send(gateway.app, 'lost@example.com')).statusCode).toBe(200);
    } finally {
      await everyKey();
      admin.disconnect();
      await gateway.close();
    }
  });
});

// The windows count by the Redis server's clock: time passes in these tests by ageing the Redis data.
describe('send limits (defaults)', () => {
  let gateway: TestGateway;
  const later = (seconds: number) => ageRedis(gateway, seconds);
  beforeAll(async () => {
    gateway = await withDefaultLimits();
  });
  afterAll(() => gateway.close());

  it('allows one code per email per minute, and Retry-After is the true remaining wait', async () => {
    const start = await redisNow(gateway);
    const first = await send(gateway.app, 'cooldown@example.com');
    const sent = await redisNow(gateway);
    expect(body(first).data.resendIn).toBe(60);
    await expectRetryAfter(gateway, await send(gateway.app, 'cooldown@example.com'), 60, start);
    // 59 s after the send, the real time gone by included: what is left of the last second is 1.
    await later(59 - ((await redisNow(gateway)) - sent) / 1000);
    expect(expectTooMany(await send(gateway.app, ' Cooldown@Example.com'))).toBe(1);
    await later(1);
    expect((await send(gateway.app, 'cooldown@example.com')).statusCode).toBe(200);
  });

  it('lifts the cooldown once a code signs in: a client whose answer was lost asks again at once', async () => {
    const { code } = body(await send(gateway.app, 'lost-answer@example.com')).data;
    expect((await verify(gateway.app, 'lost-answer@example.com', code)).statusCode).toBe(200);
    // The answer never arrived; the client sends the same code again, as if none had been sent…
    const again = await verify(gateway.app, 'lost-answer@example.com', code);
    expect(again.statusCode).toBe(404);
    expect(again.headers['tessera-error-code']).toBe('OTP_NOT_FOUND');
    // …then asks for another, which comes at once.
    const next = await send(gateway.app, 'lost-answer@example.com');
    expect(next.statusCode).toBe(200);
    expect((await verify(gateway.app, 'lost-answer@example.com', body(next).data.code)).statusCode).toBe(200);
  });

  it('keeps the cooldown of a code sent while the one before it signs in', async () => {
    const email = 'crossing@example.com';
    const { code } = body(await send(gateway.app, email)).data;
    await later(60);
    // The sign-in with the first code and the send of the next, at once: here the second is counted,
    // then the first signs in, then the second's code is stored (stored before, it would have
    // replaced the first, which would then be a wrong code).
    const [signedIn, sent] = await Promise.all([verify(gateway.app, email, code), send(gateway.app, email)]);
    expect(sent.statusCode).toBe(200);
    expect([200, 400]).toContain(signedIn.statusCode);
    const third = await send(gateway.app, email);
    expect(third.headers['tessera-error-code']).toBe('SEND_COOLDOWN');
    expect(expectTooMany(third)).toBeGreaterThan(55);
  });

  it('allows 5 codes per email per rolling hour', async () => {
    const start = await redisNow(gateway);
    for (let i = 0; i < 5; i++) {
      const sent = await send(gateway.app, 'hourly@example.com', `198.51.100.${i}`);
      expect(sent.statusCode).toBe(200);
      // The fifth fills the hour: the next code is not a minute away, but when the first leaves it.
      const resendIn = body(sent).data.resendIn;
      if (i < 4) expect(resendIn).toBe(60);
      else expect(Math.abs(resendIn - (HOUR - 240))).toBeLessThanOrEqual(1);
      await later(60);
    }
    // The first of the five leaves the window 3600 s after it was sent, 300 s ago.
    await expectRetryAfter(
      gateway,
      await send(gateway.app, 'hourly@example.com', '198.51.100.9'),
      HOUR - 300,
      start,
    );
    await later(HOUR - 300);
    expect((await send(gateway.app, 'hourly@example.com')).statusCode).toBe(200);
  });

  it('counts the hourly budget per inbox (+tags, and dots at Gmail), the cooldown per address', async () => {
    const start = await redisNow(gateway);
    const ip = (i: number) => `198.51.102.${i}`;
    expect((await send(gateway.app, 'victim@gmail.com', ip(0))).statusCode).toBe(200);
    // Another spelling of the inbox is not held back by the address's cooldown…
    expect((await send(gateway.app, 'victim+1@gmail.com', ip(1))).statusCode).toBe(200);
    // …while the address itself is (and its refused send counts nowhere).
    const cooling = await send(gateway.app, 'victim@gmail.com', ip(2));
    await expectRetryAfter(gateway, cooling, 60, start);
    expect(body(cooling).errors).toContain('A code was sent to this email moments ago');
    for (const [i, email] of [
      'v.ictim@gmail.com',
      'Vic.Tim+news@googlemail.com',
      'victim+2@gmail.com',
    ].entries()) {
      const sent = await send(gateway.app, email, ip(i + 3));
      expect(sent.statusCode).toBe(200);
      // Each code still goes to the address as given.
      expect(body(sent).data.email).toBe(email.toLowerCase());
    }
    // The sixth code for the inbox, under a spelling never used: refused until the first is an hour old.
    const sixth = await send(gateway.app, 'victim+3@gmail.com', ip(9));
    await expectRetryAfter(gateway, sixth, HOUR, start);
    expect(body(sixth).errors).toContain(
      'Too many codes were requested for this inbox (an address and its +tag spellings count together)',
    );
    // Other inboxes, at Gmail or elsewhere, have budgets of their own.
    expect((await send(gateway.app, 'victim.b@gmail.com', ip(10))).statusCode).toBe(200);
    expect((await send(gateway.app, 'victim@example.net', ip(11))).statusCode).toBe(200);
    await later(HOUR);
    expect((await send(gateway.app, 'victim+3@gmail.com', ip(12))).statusCode).toBe(200);
  });

  it('tells the wait of the window that frees up last when two are full', async () => {
    const start = await redisNow(gateway);
    for (let i = 0; i < 5; i++) {
      if (i > 0) await later(60);
      expect((await send(gateway.app, 'two-full@example.com', `198.51.101.${i}`)).statusCode).toBe(200);
    }
    await later(30);
    // Both the cooldown (30 s left) and the hourly cap (3330 s left) refuse: the answer is 3330.
    const refused = () => send(gateway.app, 'two-full@example.com', '198.51.101.9');
    await expectRetryAfter(gateway, await refused(), HOUR - 270, start);
    await later(30);
    await expectRetryAfter(gateway, await refused(), HOUR - 300, start);
  });

  it('allows 30 codes per client IP per hour, whatever the emails; other IPs are unaffected', async () => {
    for (let i = 0; i < 30; i++) {
      expect((await send(gateway.app, `ip-${i}@example.com`, '192.0.2.7')).statusCode).toBe(200);
    }
    expectTooMany(await send(gateway.app, 'ip-30@example.com', '192.0.2.7'));
    expect((await send(gateway.app, 'ip-30@example.com', '192.0.2.8')).statusCode).toBe(200);
    await later(HOUR);
    expect((await send(gateway.app, 'ip-31@example.com', '192.0.2.7')).statusCode).toBe(200);
  });

  it('counts IPv6 clients per /64', async () => {
    for (let i = 0; i < 30; i++) {
      expect((await send(gateway.app, `v6-${i}@example.com`, `2001:db8:1:2::${i + 1}`)).statusCode).toBe(200);
    }
    expectTooMany(await send(gateway.app, 'v6-30@example.com', '2001:db8:1:2:ffff::1'));
  });

  it('counts nothing of a send that failed halfway: the email may have a code at once', async () => {
    // The client IP's log cannot be read (as when its Redis Cluster node is down) while the email's can.
    const broken = '{ip:192.0.2.201}:sends';
    await gateway.app.redis.set(broken, 'not a log');
    try {
      const failed = await send(gateway.app, 'half-counted@example.com', '192.0.2.201');
      expect(failed.statusCode).toBeGreaterThanOrEqual(500);
      expect(body(failed).isSuccess).toBe(false);
    } finally {
      await gateway.app.redis.del(broken);
    }
    expect((await send(gateway.app, 'half-counted@example.com', '192.0.2.202')).statusCode).toBe(200);
  });

  it('counts nothing of a send that failed halfway under another spelling of an inbox either', async () => {
    const broken = '{ip:192.0.2.203}:sends';
    await gateway.app.redis.set(broken, 'not a log');
    try {
      const failed = await send(gateway.app, 'half+0@example.com', '192.0.2.203');
      expect(failed.statusCode).toBeGreaterThanOrEqual(500);
    } finally {
      await gateway.app.redis.del(broken);
    }
    // The inbox's whole hourly budget is left: five codes, under five more spellings.
    for (let i = 1; i <= 5; i++)
      expect((await send(gateway.app, `half+${i}@example.com`, `192.0.2.${210 + i}`)).statusCode).toBe(200);
    expectTooMany(await send(gateway.app, 'half+6@example.com', '192.0.2.220'));
  });

  it("records an inbox's first refusal for the account of the inbox's own address", async () => {
    const owner = await signIn(gateway.app, 'owner@example.org');
    for (let i = 1; i <= 4; i++)
      expect((await send(gateway.app, `owner+${i}@example.org`, `192.0.2.${230 + i}`)).statusCode).toBe(200);
    expectTooMany(await send(gateway.app, 'owner+5@example.org', '192.0.2.239'));
    const events = await gateway.app.db
      .selectFrom('securityEvents')
      .select(['type', 'details'])
      .where('userId', '=', String(owner.user._id))
      .where('type', '=', 'rate_limited')
      .execute();
    expect(events).toEqual([{ type: 'rate_limited', details: { limit: 'send:email' } }]);
  });

  it('records the first refusal of a full window as a security event, not every refused request', async () => {
    await send(gateway.app, 'noted@example.com', '192.0.2.200');
    for (let i = 0; i < 3; i++) expectTooMany(await send(gateway.app, 'noted@example.com', '192.0.2.200'));
    const events = await gateway.app.db
      .selectFrom('securityEvents')
      .selectAll()
      .where('type', '=', 'rate_limited')
      .where('ipAddress', '=', '192.0.2.200')
      .execute();
    expect(events).toHaveLength(1);
    expect(events[0]?.details).toEqual({ limit: 'send:cooldown' });
  });
});

describe('verify limits (defaults)', () => {
  let gateway: TestGateway;
  const later = (seconds: number) => ageRedis(gateway, seconds);
  beforeAll(async () => {
    gateway = await withDefaultLimits();
  });
  afterAll(() => gateway.close());

  /** Lock-outs in the security log by scope, all of them or those from one address. */
  async function lockouts(ip?: string): Promise<Record<string, number>> {
    let query = gateway.app.db
      .selectFrom('securityEvents')
      .select('details')
      .where('type', '=', 'code_locked');
    if (ip) query = query.where('ipAddress', '=', ip);
    const counts: Record<string, number> = {};
    for (const { details } of await query.execute()) {
      const scope = (details as Json).scope as string;
      counts[scope] = (counts[scope] ?? 0) + 1;
    }
    return counts;
  }

  /** A new code for the email, waiting out the resend cooldown first. */
  async function freshCode(email: string, ip?: string): Promise<string> {
    await later(60);
    const response = await send(gateway.app, email, ip);
    expect(response.statusCode).toBe(200);
    return body(response).data.code;
  }

  it('refuses every verification of an email for 24 h once 20 wrong codes failed, whatever the codes sent, and sends it no code meanwhile', async () => {
    const email = 'target@example.com';
    const start = await redisNow(gateway);
    // Three codes take 5 wrong guesses each (from different addresses) and lock; a fourth takes 4.
    for (let code = 0; code < 4; code++) {
      const right = await freshCode(email);
      for (let i = 0; i < (code < 3 ? 5 : 4); i++) {
        expect((await verify(gateway.app, email, wrongCode(right), `10.0.${code}.${i}`)).statusCode).toBe(
          400,
        );
      }
    }
    // A brand-new code; its first wrong guess is the email's 20th, which says so.
    const right = await freshCode(email, '10.9.9.9');
    const twentieth = await verify(gateway.app, email, wrongCode(right), '10.9.9.8');
    expect(twentieth.statusCode).toBe(400);
    expect(body(twentieth).errors.at(-1)).toMatch(
      /^Too many wrong codes for this email: no code is accepted for \d+ seconds$/,
    );
    // Until the first failure, 240 s ago, is 24 h old: even the right code is refused, from anywhere…
    const retryAfter = await expectRetryAfter(
      gateway,
      await verify(gateway.app, email, right, '10.9.9.9'),
      DAY - 240,
      start,
    );
    expect(body(await verify(gateway.app, email, right, '10.9.9.9')).errors).toContain(
      'Too many wrong codes for this email',
    );
    // …and, a minute later, no new code is sent, which it could not take.
    await later(60);
    const refusedSend = await send(gateway.app, email, '10.9.9.7');
    const sendWait = await expectRetryAfter(gateway, refusedSend, retryAfter - 60, start);
    expect(body(refusedSend).errors).toContain('Too many wrong codes for this email');
    // Each kind of refusal is in the security log once, the send's after the verification's.
    const refusals = await gateway.app.db
      .selectFrom('securityEvents')
      .select('details')
      .where('type', '=', 'rate_limited')
      .orderBy('createdAt')
      .execute();
    expect(refusals.map(({ details }) => (details as Json).limit)).toEqual(['verify:email', 'send:failures']);
    await later(sendWait);
    // A new code is sent and accepted.
    expect((await verify(gateway.app, email, await freshCode(email))).statusCode).toBe(200);
    // Each locked code, and the email's budget once, are lock-outs in the security log.
    expect(await lockouts()).toEqual({ code: 3, email: 1 });
  });

  it('answers guesses after a sign-in as if no code had been sent: nothing tells which code signed in, or that one did', async () => {
    const signedIn = 'signed-in@example.com';
    const right = await freshCode(signedIn);
    expect((await verify(gateway.app, signedIn, right)).statusCode).toBe(200);
    // The same guesses at that address and at one no code was ever sent to: alike, and none counted.
    for (const email of [signedIn, 'never-signed-in@example.com'])
      for (let i = 0; i < 21; i++) {
        const guess = i === 20 ? right : String(i).padStart(4, '0');
        const answer = await verify(gateway.app, email, guess, `10.1.${i}.1`);
        expect(answer.statusCode, `${email} ${guess}`).toBe(404);
        expect(answer.headers['tessera-error-code']).toBe('OTP_NOT_FOUND');
      }
  });

  it('refuses verifications from an IP with 50 wrong codes in the last hour', async () => {
    const ip = '10.50.0.1';
    const start = await redisNow(gateway);
    for (let n = 0; n < 10; n++) {
      const right = await freshCode(`ip-guess-${n}@example.com`);
      for (let i = 0; i < 5; i++) {
        expect(
          (await verify(gateway.app, `ip-guess-${n}@example.com`, wrongCode(right), ip)).statusCode,
        ).toBe(400);
      }
    }
    const right = await freshCode('innocent@example.com');
    // Told the IP's wait: until its first wrong code, 600 s ago (ten codes a minute apart), is an hour old.
    await expectRetryAfter(
      gateway,
      await verify(gateway.app, 'innocent@example.com', right, ip),
      HOUR - 600,
      start,
    );
    expect((await verify(gateway.app, 'innocent@example.com', right, '10.50.0.2')).statusCode).toBe(200);
    expect(await lockouts(ip)).toEqual({ code: 10, ip: 1 });
  });

  it('evaluates at most 50 wrong codes of one IP, however many arrive at once', async () => {
    const ip = '10.51.0.1';
    // 12 codes, each sent from an address of its own, each guessed wrong 5 times at once: 60 guesses.
    const codes = await Promise.all(
      Array.from({ length: 12 }, async (_, n) => {
        const email = `flood-${n}@example.com`;
        const sent = await send(gateway.app, email, `10.52.0.${n}`);
        expect(sent.statusCode).toBe(200);
        return { email, code: body(sent).data.code as string };
      }),
    );
    const guesses = await Promise.all(
      codes.flatMap(({ email, code }) =>
        Array.from({ length: 5 }, () => verify(gateway.app, email, wrongCode(code), ip)),
      ),
    );
    expect(statuses(guesses)).toEqual({ 400: 50, 429: 10 });
  });
});

describe('the brute-force bound', () => {
  it('gives an attacker with unlimited addresses at most 20 evaluated guesses per email in 24 h', async () => {
    const gateway = await withDefaultLimits();
    let elapsed = 0;
    const later = async (seconds: number) => {
      elapsed += seconds;
      await ageRedis(gateway, seconds);
    };
    try {
      const email = 'victim@example.com';
      let address = 0;
      const nextIp = () => `100.64.${(address >> 8) & 255}.${address++ & 255}`;
      let guesses = 0;
      let codesSent = 0;
      // As fast as the gateway allows: ask for a code, guess until refused, wait exactly as told.
      while (elapsed < DAY) {
        const sent = await send(gateway.app, email, nextIp());
        if (sent.statusCode === 429) {
          await later(Number(sent.headers['retry-after']));
          continue;
        }
        codesSent++;
        const right = body(sent).data.code as string;
        for (let attempt = 0; ; attempt++) {
          // Never the right code, so every guess the gateway evaluates is counted.
          const guess = String((Number(right) + 1 + attempt) % 10_000).padStart(4, '0');
          const response = await verify(gateway.app, email, guess, nextIp());
          if (response.statusCode === 400) {
            guesses++;
            continue;
          }
          if (response.statusCode === 429) await later(Number(response.headers['retry-after']));
          break;
        }
      }
      console.info(`brute force, 24 h simulated: ${guesses} guesses evaluated over ${codesSent} codes`);
      expect(guesses).toBe(20);
      expect(guesses / 10_000).toBeLessThanOrEqual(0.002);
    } finally {
      await gateway.close();
    }
  });
});

describe('the general per-IP limit', () => {
  it('answers every route past RATE_LIMIT_MAX with an enveloped 429, unknown routes too, never the probes', async () => {
    const gateway = await startGateway({ RATE_LIMIT_MAX: '3' });
    try {
      for (let i = 0; i < 3; i++) {
        expect(
          (await gateway.app.inject({ url: '/.well-known/jwks.json', ...from('192.0.2.50') })).statusCode,
        ).toBe(200);
      }
      const refused = await gateway.app.inject({ url: '/no/such/route', ...from('192.0.2.50') });
      expect(expectTooMany(refused)).toBeLessThanOrEqual(60);
      expectTooMany(await send(gateway.app, 'x@example.com', '192.0.2.50'));
      // Load balancers and orchestrators probe from a few addresses, often: never refused.
      for (let i = 0; i < 500; i++) {
        const probe = await gateway.app.inject({ url: '/health/live', ...from('192.0.2.50') });
        expect(probe.statusCode).toBe(200);
      }
      expect((await gateway.app.inject({ url: '/health/ready', ...from('192.0.2.50') })).statusCode).toBe(
        200,
      );
      expect(
        (await gateway.app.inject({ url: '/.well-known/jwks.json', ...from('192.0.2.51') })).statusCode,
      ).toBe(200);
    } finally {
      await gateway.close();
    }
  });

  it('does not count CORS preflights or requests refused before routing', async () => {
    const gateway = await startGateway({ RATE_LIMIT_MAX: '2', CORS_ORIGINS: 'https://app.example.com' });
    try {
      const ip = from('192.0.2.60');
      for (let i = 0; i < 5; i++) {
        const preflight = await gateway.app.inject({
          method: 'OPTIONS',
          url: SEND,
          headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST' },
          ...ip,
        });
        expect(preflight.statusCode).toBe(204);
        // A URL that cannot be decoded is refused before any route is found.
        expect((await gateway.app.inject({ url: '/api/v1/%E0%A4%A', ...ip })).statusCode).toBe(400);
      }
      const counted = [];
      for (let i = 0; i < 3; i++)
        counted.push(await gateway.app.inject({ url: '/.well-known/jwks.json', ...ip }));
      expect(counted.map((response) => response.statusCode)).toEqual([200, 200, 429]);
    } finally {
      await gateway.close();
    }
  });

  it('takes the client IP from X-Forwarded-For only behind a trusted proxy', async () => {
    const direct = await startGateway({ RATE_LIMIT_MAX: '2' });
    const proxied = await startGateway({ RATE_LIMIT_MAX: '2', TRUST_PROXY: 'true' });
    try {
      const spoofing = (app: Gateway, i: number) =>
        app.inject({ url: '/.well-known/jwks.json', headers: { 'x-forwarded-for': `198.18.0.${i}` } });
      const viaDirect = await Promise.all([0, 1, 2, 3].map((i) => spoofing(direct.app, i)));
      expect(statuses(viaDirect)).toEqual({ 200: 2, 429: 2 });
      const viaProxy = await Promise.all([0, 1, 2, 3].map((i) => spoofing(proxied.app, i)));
      expect(statuses(viaProxy)).toEqual({ 200: 4 });
    } finally {
      await Promise.all([direct.close(), proxied.close()]);
    }
  });

  it('counts a client whose X-Forwarded-For entry is no address as its connection, however it varies the text', async () => {
    const proxied = await startGateway({ RATE_LIMIT_MAX: '2', TRUST_PROXY: '1' });
    try {
      const words = await Promise.all(
        [0, 1, 2, 3].map((i) =>
          proxied.app.inject({
            url: '/.well-known/jwks.json',
            remoteAddress: '198.51.100.20',
            headers: { 'x-forwarded-for': `not an address ${i}` },
          }),
        ),
      );
      expect(statuses(words)).toEqual({ 200: 2, 429: 2 });
      // The same client as 198.51.100.21:port, its port varied: one client.
      const withPorts = await Promise.all(
        [0, 1, 2, 3].map((i) =>
          proxied.app.inject({
            url: '/.well-known/jwks.json',
            remoteAddress: '198.51.100.20',
            headers: { 'x-forwarded-for': `198.51.100.21:${40000 + i}` },
          }),
        ),
      );
      expect(statuses(withPorts)).toEqual({ 200: 2, 429: 2 });
    } finally {
      await proxied.close();
    }
  });
});

describe('two gateway processes sharing one Redis', () => {
  const limits = {
    OTP_MAX_SENDS_PER_IP_PER_HOUR: '30',
    OTP_MAX_ATTEMPTS: '1000',
    OTP_MAX_FAILURES_PER_EMAIL_PER_DAY: '20',
    RATE_LIMIT_MAX: '100',
  };
  let first: TestGateway;
  let second: Gateway;
  beforeAll(async () => {
    first = await startGateway(limits);
    // The same configuration (database, Redis, key) as a second, independent instance.
    second = await buildApp(first.config);
  });
  afterAll(async () => {
    await second.close();
    await first.close();
  });
  const either = (i: number) => (i % 2 === 0 ? first.app : second);

  it('never send more codes together than the per-IP limit', async () => {
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) => send(either(i), `pair-${i}@example.com`, '192.0.2.99')),
    );
    expect(statuses(responses)).toEqual({ 200: 30, 429: 20 });
  });

  it('never evaluate more wrong codes together than the per-email daily bound', async () => {
    const code = body(await send(first.app, 'shared@example.com', '192.0.2.98')).data.code as string;
    const responses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        verify(either(i), 'shared@example.com', wrongCode(code), `198.51.100.${i}`),
      ),
    );
    expect(statuses(responses)).toEqual({ 400: 20, 429: 20 });
  });

  it('never answer more requests together than the general limit', async () => {
    const responses = await Promise.all(
      Array.from({ length: 160 }, (_, i) =>
        either(i).inject({ url: '/.well-known/jwks.json', ...from('192.0.2.97') }),
      ),
    );
    expect(statuses(responses)).toEqual({ 200: 100, 429: 60 });
  });
});
