import { createMailWorker } from '@tessera/mailer';
import { loadConfig as loadMailerConfig } from '@tessera/mailer/config';
import { createTransport } from '@tessera/mailer/transport';
import { startPrivateRedis, startSmtpSink } from '@tessera/testing';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { runLimitsCli } from '../src/limits-cli.ts';
import { body, envBeside, post, runScript, signIn, startGateway, type TestGateway } from './helpers.ts';

// The operator's lift of an address's sign-in limits (`pnpm --filter @tessera/auth-gateway
// limits:lift`), and their look at them (`limits:show`), run against the Redis of a running gateway,
// as the README's support steps use them.

const SEND = '/api/v1/auth/send-otp-email';
const VERIFY = '/api/v1/auth/verify-otp-email';

// The commands read the limits as the gateways have them.
const LIMITS = {
  OTP_RESEND_COOLDOWN: '60',
  OTP_MAX_FAILURES_PER_EMAIL_PER_DAY: '3',
  OTP_MAX_SENDS_PER_EMAIL_PER_HOUR: '2',
};

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway(LIMITS);
  // Its background work started, and its OTP_SECRET told, as a running gateway's is.
  await gateway.app.ready();
  await vi.waitFor(async () => expect(await gateway.app.redis.hlen('fleet:otp-secrets')).toBe(1), {
    timeout: 10_000,
  });
});
afterAll(() => gateway?.close());

/** Runs the command with `on`'s environment, and `more`; its exit code and what it printed. */
async function runLimits(argv: string[], more: NodeJS.ProcessEnv = {}, on = gateway) {
  const out = vi.spyOn(console, 'log').mockImplementation(() => {});
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  try {
    const code = await runLimitsCli(argv, {
      ...envBeside(on, LIMITS),
      ...more,
    });
    return { code, out: out.mock.calls.join('\n'), err: err.mock.calls.join('\n') };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}
const limitsLift = (args: string[], more: NodeJS.ProcessEnv = {}) => runLimits(['lift', ...args], more);
const limitsShow = (args: string[], more: NodeJS.ProcessEnv = {}) => runLimits(['show', ...args], more);

const send = (email: string) => post(gateway.app, SEND, { email });
const guess = (email: string, code: string) => post(gateway.app, VERIFY, { email, code });

/** Locks `email` out as an attacker would: three wrong codes fill its daily budget. */
async function lockOut(email: string) {
  const { code } = body(await send(email)).data;
  const wrong = code === '0000' ? '0001' : '0000';
  for (let i = 0; i < 3; i++) await guess(email, wrong);
  const refused = await send(email);
  expect(refused.statusCode).toBe(429);
  expect(refused.headers['tessera-error-code']).toBe('VERIFY_LIMIT_EMAIL');
}

describe('limits:lift', () => {
  it('lets a locked-out address ask for a code and sign in at once; another locked address stays locked', async () => {
    await lockOut('Locked.Out@Example.com');
    await lockOut('also-locked@example.com');

    const lifted = await limitsLift(['--email', ' Locked.Out@Example.com ']);
    expect(lifted).toMatchObject({ code: 0, err: '' });
    expect(lifted.out).toBe(
      'limits lifted for locked.out@example.com: forgot 3 wrong codes in the last 24 hours and 1 code ' +
        "sent in the last hour; it may ask for a code now (a client IP's own limits stay)",
    );

    const signedIn = await signIn(gateway.app, 'locked.out@example.com');
    expect(signedIn.user.email).toBe('locked.out@example.com');
    expect((await send('also-locked@example.com')).statusCode).toBe(429);
  });

  it("frees the inbox's hourly budget that its +tag spellings used up, and says so with --json", async () => {
    expect((await send('inbox+1@example.com')).statusCode).toBe(200);
    expect((await send('inbox+2@example.com')).statusCode).toBe(200);
    const full = await send('inbox@example.com');
    expect(full.headers['tessera-error-code']).toBe('SEND_LIMIT_EMAIL');

    const lifted = await limitsLift(['--email', 'inbox@example.com', '--json']);
    expect(lifted.code).toBe(0);
    expect(JSON.parse(lifted.out)).toEqual({ email: 'inbox@example.com', wrongCodes: 0, codesSent: 2 });
    expect((await send('inbox@example.com')).statusCode).toBe(200);
  });

  it("refuses another OTP_SECRET than the gateways', under which none of their keys can be found", async () => {
    await lockOut('other-secret@example.com');
    const lifted = await limitsLift(['--email', 'other-secret@example.com'], {
      OTP_SECRET: 'another-otp-secret-that-is-long-enough-0123456789',
    });
    expect(lifted).toEqual({
      code: 1,
      out: '',
      err:
        `limits lift: OTP_SECRET is none of those the gateways of REDIS_KEY_PREFIX "${gateway.config.redis.keyPrefix}" ` +
        'on this Redis ran with in the last 5 minutes, so none of their keys can be found with it: give the command ' +
        'the REDIS_URL (REDIS_CLUSTER_NODES), REDIS_KEY_PREFIX and OTP_SECRET of the gateways meant',
    });
    expect((await send('other-secret@example.com')).statusCode).toBe(429);
  });

  it('says it found nothing under another key prefix, where no gateway told its secret, and what to check', async () => {
    await lockOut('other-prefix@example.com');
    const lifted = await limitsLift(['--email', 'other-prefix@example.com'], {
      REDIS_KEY_PREFIX: 'staging:',
    });
    expect(lifted).toMatchObject({ code: 0, err: '' });
    expect(lifted.out).toBe(
      'nothing to lift for other-prefix@example.com: no wrong codes in the last 24 hours and no codes ' +
        "sent in the last hour (if it is refused, check that OTP_SECRET and REDIS_KEY_PREFIX are the gateway's)",
    );
    expect((await send('other-prefix@example.com')).statusCode).toBe(429);
  });
});

describe('limits:lift in production', () => {
  it('needs the Redis settings and OTP_SECRET alone, not the signing key, the mail job key or the database', async () => {
    await lockOut('production@example.com');
    const production = { APP_ENV: 'production', DATABASE_URL: undefined, BULLMQ_PREFIX: undefined };
    const lifted = await limitsLift(['--email', 'production@example.com'], production);
    expect(lifted).toMatchObject({ code: 0, err: '' });
    expect(lifted.out).toMatch(/^limits lifted for production@example\.com: forgot 3 wrong codes /);
    expect((await send('production@example.com')).statusCode).toBe(200);

    const unkeyed = await limitsLift(['--email', 'production@example.com'], {
      ...production,
      OTP_SECRET: undefined,
    });
    expect(unkeyed).toEqual({
      code: 1,
      out: '',
      err: 'limits lift: Invalid configuration: OTP_SECRET is required when APP_ENV=production',
    });
    // Misspelled, it is named before the refusal it causes.
    const misspelled = await limitsLift(['--email', 'production@example.com'], {
      ...production,
      OTP_SECRET: undefined,
      OTP_SECRT: 'a-secret-of-forty-characters-0123456789',
    });
    expect(misspelled.err.split('\n')).toEqual([
      'limits lift: OTP_SECRT is no setting of Tessera and is ignored: did you mean OTP_SECRET?',
      'limits lift: Invalid configuration: OTP_SECRET is required when APP_ENV=production',
    ]);
  });
});

describe('limits:lift, as a process', () => {
  it("prints its line alone at a gateway's LOG_LEVEL: the warnings a gateway gives at start are not the command's", async () => {
    // A Redis that keeps nothing on disk, of which a gateway at `info` warns at start.
    const redis = await startPrivateRedis(['--appendonly', 'no']);
    onTestFinished(() => redis.remove());
    const env = { ...envBeside(gateway), REDIS_URL: redis.url, LOG_LEVEL: 'info' };
    const run = await runScript(['src/limits-cli.ts', 'lift', '--email', 'process@example.com'], env);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toMatch(/^nothing to lift for process@example\.com: /);
    const debug = await runScript(['src/limits-cli.ts', 'lift', '--email', 'process@example.com'], {
      ...env,
      LOG_LEVEL: 'debug',
    });
    expect(debug.stderr).toContain('Redis may lose queued emails');
  });
});

describe('limits:lift, misused or failing', () => {
  it('answers 2 with the usage when the address is missing or given twice', async () => {
    for (const args of [[], ['--email', ''], ['--email', 'a@example.com', '--email', 'b@example.com']]) {
      const { code, err } = await limitsLift(args);
      expect(code).toBe(2);
      expect(err).toContain('give --email once: one address at a time');
      expect(err).toContain('usage: limits-cli.ts lift --email <address>');
    }
  });

  it('prints the usage for --help, and succeeds', async () => {
    const { code, out } = await limitsLift(['--help']);
    expect(code).toBe(0);
    expect(out).toContain('usage: limits-cli.ts lift --email <address>');
  });

  it('answers 1 in one line when Redis cannot be reached', async () => {
    const { code, err } = await limitsLift(['--email', 'a@example.com'], {
      REDIS_URL: 'redis://127.0.0.1:1',
    });
    expect(code).toBe(1);
    expect(err.split('\n')).toHaveLength(1);
    expect(err).toMatch(/^limits lift: .*redis/i);
  });
});

describe('limits:show', () => {
  it("tells a locked-out address's code, limits and waiting email, and changes none of them", async () => {
    await lockOut('Looked.At@Example.com');
    const shown = await limitsShow(['--email', ' Looked.At@Example.com ']);
    expect(shown).toMatchObject({ code: 0, err: '' });
    const lines = shown.out.split('\n');
    expect(lines).toHaveLength(6);
    expect(lines[0]).toBe(
      "sign-in limits of looked.at@example.com, as they stand (a client IP's own are not shown):",
    );
    expect(lines[1]).toMatch(
      /^- code: held, with 3 of 5 wrong guesses, expires in (?:5 min|4 min [1-5]?\d s)$/,
    );
    expect(lines[2]).toMatch(/^- resend cooldown: (?:1 min|[45]\d s) left$/);
    expect(lines[3]).toBe('- codes sent to its inbox in the last hour: 1 of 2');
    expect(lines[4]).toMatch(
      /^- wrong codes in the last 24 hours: 3 of 3: every send and sign-in is refused for (?:24 h|23 h 5\d min)$/,
    );
    // No mailer runs beside this gateway: the email waits for one.
    expect(lines[5]).toMatch(
      /^- newest code email: waiting for a mailer since 20\d\d-\d\d-\d\dT[\d:.]+Z \(job [\w-]+\)$/,
    );
    // Nothing changed: still refused, and the lift still finds the three wrong codes.
    expect((await send('looked.at@example.com')).headers['tessera-error-code']).toBe('VERIFY_LIMIT_EMAIL');
    expect((await limitsLift(['--email', 'looked.at@example.com'])).out).toMatch(/forgot 3 wrong codes /);
  });

  it("says with --json how full each window is and when it frees up, the inbox's +tag spellings counted", async () => {
    expect((await send('counted+a@example.com')).statusCode).toBe(200);
    expect((await send('counted+b@example.com')).statusCode).toBe(200);
    const shown = await limitsShow(['--email', 'counted@example.com', '--json']);
    expect(shown.code).toBe(0);
    const json = JSON.parse(shown.out);
    expect(json).toMatchObject({
      email: 'counted@example.com',
      // Its +tag spellings had codes, not the address itself.
      code: null,
      cooldown: { held: 0, limit: 1, retryAfter: 0 },
      inbox: { held: 2, limit: 2 },
      wrongCodes: { held: 0, limit: 3, retryAfter: 0 },
      codeEmail: null,
    });
    expect(json.inbox.retryAfter).toBeGreaterThan(3500);
    expect(json.inbox.retryAfter).toBeLessThanOrEqual(3600);
    expect((await send('counted@example.com')).headers['tessera-error-code']).toBe('SEND_LIMIT_EMAIL');
    const text = await limitsShow(['--email', 'counted@example.com']);
    const [inboxLine, ...rest] = text.out.split('\n').slice(3);
    expect(inboxLine).toMatch(
      /^- codes sent to its inbox in the last hour: 2 of 2: no code is sent for (?:1 h|59 min \d+ s)$/,
    );
    expect(rest).toEqual([
      '- wrong codes in the last 24 hours: 0 of 3',
      // Its record lasts the code's life (5 minutes) and a minute.
      '- newest code email: none queued in the last 6 min',
    ]);
  });

  it("follows the newest code email through the SMTP server's refusals to its acceptance, or its failure", {
    timeout: 30_000,
  }, async () => {
    const sink = await startSmtpSink();
    const config = loadMailerConfig({
      APP_ENV: 'test',
      REDIS_URL: gateway.config.redis.url,
      BULLMQ_PREFIX: gateway.config.mail.queuePrefix,
      SMTP_URL: sink.url,
      MAIL_FROM: 'Tessera <no-reply@tessera.test>',
    });
    const transport = createTransport(config);
    const worker = createMailWorker({ config, transport, logger: pino({ level: 'silent' }) });
    onTestFinished(async () => {
      await worker.close();
      transport.close();
      await sink.close();
    });
    const email = 'delayed@example.com';
    const codeEmail = async () => JSON.parse((await limitsShow(['--email', email, '--json'])).out).codeEmail;

    sink.failNext(Number.MAX_SAFE_INTEGER, 451, 'DATA', 'Try again later');
    expect((await send(email)).statusCode).toBe(200);
    await vi.waitFor(async () => expect((await codeEmail()).state).toBe('delayed'), { timeout: 10_000 });
    const shown = await limitsShow(['--email', email]);
    expect(shown.out.split('\n')[5]).toMatch(
      /^- newest code email: waiting for its retry after \d+ failed attempts?, the last: .*451.*Try again later.* \(job [\w-]+\)$/,
    );

    sink.failNext(0);
    await vi.waitFor(() => expect(sink.messages.some((mail) => mail.to.includes(email))).toBe(true), {
      timeout: 20_000,
    });
    const accepted = await codeEmail();
    expect(accepted).toMatchObject({ state: 'accepted' });
    expect(Math.abs(Date.parse(accepted.acceptedAt) - Date.now())).toBeLessThan(20_000);

    // The address refused for good: the newest email failed, with the server's reply.
    const refused = 'no-such-user@example.com';
    sink.failNext(Number.MAX_SAFE_INTEGER, 550, 'RCPT TO', 'No such user');
    expect((await send(refused)).statusCode).toBe(200);
    await vi.waitFor(
      async () => {
        const failed = await limitsShow(['--email', refused]);
        expect(failed.out.split('\n')[5]).toMatch(
          /^- newest code email: failed for good after 1 attempt, the last: .*550.*No such user.* \(job [\w-]+\)$/,
        );
      },
      { timeout: 10_000 },
    );
  });

  it('writes nothing to Redis, and says so when its settings find no gateway or no mail queue there', async () => {
    const prefix = `${gateway.config.redis.keyPrefix}nowhere-bull`;
    const before = await gateway.app.mailQueueRedis.keys(`${prefix}*`);
    const shown = await limitsShow(['--email', 'looked.at@example.com'], {
      REDIS_KEY_PREFIX: 'staging:',
      BULLMQ_PREFIX: prefix,
    });
    expect(shown.code).toBe(0);
    expect(shown.err.split('\n')).toEqual([
      'limits show: no gateway of REDIS_KEY_PREFIX "staging:" told this Redis its OTP_SECRET in the last 5 minutes: ' +
        'if one runs, give the command its REDIS_URL (REDIS_CLUSTER_NODES), REDIS_KEY_PREFIX and OTP_SECRET',
      `limits show: no mail queue under BULLMQ_PREFIX "${prefix}" on this Redis: give the command the gateways' BULLMQ_PREFIX ` +
        '(or, if this Redis lost its data since they started and no mailer runs, the next code queued makes it)',
    ]);
    expect(shown.out.split('\n')[5]).toBe(
      `- newest code email: unknown: no mail queue under BULLMQ_PREFIX "${prefix}" on this Redis`,
    );
    // BullMQ's queue would have written its meta key there.
    expect(before).toEqual([]);
    expect(await gateway.app.mailQueueRedis.keys(`${prefix}*`)).toEqual([]);
    expect(await gateway.app.redis.exists('fleet:otp-secrets')).toBe(1);
  });

  it('refuses, with the usage, what the gateway would not take as an address; reads its options in any order', async () => {
    for (const given of ['not an address', 'Ada <ada@example.com>', 'ada@example,com', 'ada@192.168.0.1']) {
      const { code, out, err } = await limitsShow(['--email', given]);
      expect({ code, out }).toEqual({ code: 2, out: '' });
      expect(err).toMatch(
        /^--email ".+" (is no email address|must end in a domain name: .+), as the gateway would answer\n/,
      );
      expect(err).toContain('usage: limits-cli.ts lift --email <address>');
    }
    // Why, as the gateway says it: what no code could reach before the format.
    expect((await limitsShow(['--email', 'ñandú@example.com'])).err).toMatch(
      /^--email "ñandú@example.com" is refused: non-ASCII characters before the @ are not supported, as the gateway would answer\n/,
    );
    expect(
      (
        await limitsShow([
          '--email',
          `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(60)}.com`,
        ])
      ).err,
    ).toMatch(/^--email "a+@.+" has more than 254 characters, as the gateway would answer\n/);
    const reordered = await runLimits(['--json', '--email', 'counted@example.com', 'show']);
    expect(reordered.code).toBe(0);
    expect(JSON.parse(reordered.out)).toMatchObject({ email: 'counted@example.com', inbox: { held: 2 } });
  });

  it("tells a client IP's own limits, an IPv6 client's counted by its /64", async () => {
    const from = (remoteAddress: string) => (url: string, payload: object) =>
      gateway.app.inject({ method: 'POST', url, payload, remoteAddress });
    const phone = from('2001:db8:7:7::1');
    const laptop = from('2001:db8:7:7:abcd::2');
    expect((await phone(SEND, { email: 'ip.one@example.com' })).statusCode).toBe(200);
    const sent = await laptop(SEND, { email: 'ip.two@example.com' });
    const wrong = body(sent).data.code === '0000' ? '0001' : '0000';
    expect((await laptop(VERIFY, { email: 'ip.two@example.com', code: wrong })).statusCode).toBe(400);
    // Another /64 counts apart.
    expect((await from('2001:db8:7:8::1')(SEND, { email: 'ip.three@example.com' })).statusCode).toBe(200);

    const shown = await limitsShow(['--ip', '2001:db8:7:7::99']);
    expect(shown).toMatchObject({ code: 0, err: '' });
    expect(shown.out.split('\n')).toEqual([
      'limits of the client IP 2001:db8:7:7::99, counted as 2001:db8:7:7::/64, as they stand:',
      '- codes sent at its request in the last hour: 2 of 100000',
      '- wrong codes in the last hour: 1 of 100000',
      '- requests in its window of 1 min (the general limit): 3 of 1000000',
    ]);
    // As a proxy's log writes it, with its port.
    const json = JSON.parse((await limitsShow(['--ip', '[2001:db8:7:8::1]:443', '--json'])).out);
    expect(json).toEqual({
      ip: '2001:db8:7:8::1',
      countedAs: '2001:db8:7:8::/64',
      sends: { held: 1, limit: 100000, retryAfter: 0 },
      wrongCodes: { held: 0, limit: 100000, retryAfter: 0 },
      requests: { held: 1, limit: 1000000, retryAfter: 0 },
    });
    for (const args of [
      ['--ip', 'not-an-ip'],
      ['--ip', '192.0.2.1', '--email', 'a@example.com'],
    ]) {
      const refused = await limitsShow(args);
      expect(refused.code).toBe(2);
    }
    const lift = await limitsLift(['--ip', '192.0.2.1']);
    expect(lift.code).toBe(2);
    expect(lift.err).toMatch(/^lift takes --email only: a client IP's limits stay\n/);
  });

  it("tells a client IP over the general limit for how long the gateway refuses it, and another IP's count", async () => {
    const strict = { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW: '3600' };
    const other = await startGateway({ ...LIMITS, ...strict });
    onTestFinished(() => other.close());
    await other.app.ready();
    const from = (remoteAddress: string) =>
      other.app.inject({ method: 'GET', url: '/api/v1/auth/sessions', remoteAddress });
    for (let i = 0; i < 3; i++) expect((await from('198.51.100.7')).statusCode).toBe(401);
    const refused = await from('198.51.100.7');
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['tessera-error-code']).toBe('RATE_LIMITED');
    expect((await from('198.51.100.8')).statusCode).toBe(401);

    const shown = await runLimits(['show', '--ip', '198.51.100.7'], strict, other);
    expect(shown).toMatchObject({ code: 0, err: '' });
    expect(shown.out.split('\n').at(-1)).toMatch(
      /^- requests in its window of 1 h \(the general limit\): 4 of 3: every request from it is refused for (59 min \d+ s|1 h)$/,
    );
    const json = JSON.parse((await runLimits(['show', '--ip', '198.51.100.8', '--json'], strict, other)).out);
    expect(json.requests).toEqual({ held: 1, limit: 3, retryAfter: 0 });
    // The look counted nothing: the next request of the IP below the limit is still taken.
    expect((await from('198.51.100.8')).statusCode).toBe(401);
  });

  it("refuses another OTP_SECRET than the gateways', as the lift does", async () => {
    const shown = await limitsShow(['--email', 'looked.at@example.com'], {
      OTP_SECRET: 'another-otp-secret-that-is-long-enough-0123456789',
    });
    expect(shown).toMatchObject({ code: 1, out: '' });
    expect(shown.err).toMatch(/^limits show: OTP_SECRET is none of those the gateways of REDIS_KEY_PREFIX /);
  });
});
