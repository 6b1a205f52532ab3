import { createHmac } from 'node:crypto';
import { normalizeIP } from '@fastify/rate-limit';
import { REDIS_NOW_LUA, type RedisClient } from '@tessera/redis';
import type { Result } from 'ioredis';
import {
  createSlidingWindows,
  type Refusal,
  refusedKey,
  SLIDING_WINDOW_LUA,
  type Window,
} from '../limits/sliding-window.ts';

export type VerifyOutcome =
  /** The code as it was when accepted, for `reinstate`. */
  | { result: 'ok'; accepted: AcceptedCode }
  /**
   * `lockedOut`: what this wrong guess has just locked (the code, the email's or the IP's budget);
   * `emailRetryAfter`: when it locked the email's, the seconds until a code is accepted again.
   */
  | { result: 'wrong'; attemptsLeft: number; lockedOut: LockOut[]; emailRetryAfter?: number }
  | { result: 'locked' }
  | { result: 'missing' }
  | { result: 'limited'; refusal: Refusal<'email' | 'ip'> };

type LockOut = 'code' | 'email' | 'ip';

/** An accepted code's wrong guesses and end (ms since the epoch, by the Redis server's clock). */
export interface AcceptedCode {
  attempts: number;
  expiresAt: number;
}

declare module 'ioredis' {
  interface RedisCommander<Context> {
    verifyOtp(...args: (string | number)[]): Result<[string, number, number], Context>;
    storeOtp(key: string, hash: string, ttlSeconds: number): Result<unknown, Context>;
    reinstateOtp(key: string, hash: string, attempts: number, expiresAt: number): Result<unknown, Context>;
    otpSecretsTold(
      key: string,
      fingerprint: string,
      windowMs: number,
      tell: 0 | 1,
    ): Result<[number, number], Context>;
  }
}

// Atomic check-and-consume on the keys of one email (one hash tag): the right code deletes the entry
// (single use under any concurrency), a wrong one counts an attempt on the code and a failure in the
// email's window, a code with maxAttempts failures is locked until replaced, and a full window
// refuses every verification before the code is even looked at. The comparison walks the whole hash
// whatever matches, so its time tells nothing. An accepted code lifts the email's resend cooldown: a
// client whose answer was lost may ask for another code at once. (Nothing tells it that the code had
// signed in: any answer that did would let guesses find which code signed in, and so that the address
// did.) It lifts the cooldown of its own send only, counted before the code was stored (`issued`), not
// that of a send counted since, whose code is being stored as this one signs in; a code stored by an
// earlier version tells no time and lifts the whole cooldown.
const VERIFY_OTP = `${SLIDING_WINDOW_LUA}
local code_key, failures_key, refused_key, cooldown_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local given, max, member = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local window, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()

local wait = wait_ms(failures_key, now, window, limit)
if wait > 0 then return {'limited', wait, first_refusal(refused_key, wait)} end

local stored = redis.call('HGET', code_key, 'hash')
if not stored then return {'missing', 0, 0} end
local attempts = tonumber(redis.call('HGET', code_key, 'attempts'))
if attempts >= max then return {'locked', 0, 0} end
local diff = (#stored == #given) and 0 or 1
for i = 1, math.min(#stored, #given) do
  diff = bit.bor(diff, bit.bxor(string.byte(stored, i), string.byte(given, i)))
end
if diff == 0 then
  local expires_at = now + redis.call('PTTL', code_key)
  local issued = redis.call('HGET', code_key, 'issued')
  redis.call('DEL', code_key)
  if issued then redis.call('ZREMRANGEBYSCORE', cooldown_key, '-inf', issued)
  else redis.call('DEL', cooldown_key) end
  return {'ok', attempts, expires_at}
end
attempts = redis.call('HINCRBY', code_key, 'attempts', 1)
record(failures_key, now, window, member)
return {'wrong', max - attempts, wait_ms(failures_key, now, window, limit)}
`;

// A new code replaces the email's previous one, its attempts from zero, with its own expiry and the
// time it was stored (ms, by the Redis server's clock, as the cooldown counts): one command rather than
// a transaction of four.
const STORE_OTP = `${REDIS_NOW_LUA}
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'hash', ARGV[1], 'attempts', 0, 'issued', string.format('%.0f', now_ms()))
redis.call('EXPIRE', KEYS[1], ARGV[2])
`;

// An accepted code put back as it was: its wrong guesses still counted and its end unchanged (gone
// at once if that has passed), unless a newer code has replaced it meanwhile.
const REINSTATE_OTP = `
if redis.call('EXISTS', KEYS[1]) == 1 then return end
redis.call('HSET', KEYS[1], 'hash', ARGV[1], 'attempts', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
`;

interface OtpLimits {
  resendCooldown: number;
  maxSendsPerEmailPerHour: number;
  maxSendsPerIpPerHour: number;
  maxFailuresPerEmailPerDay: number;
  maxFailuresPerIpPerHour: number;
}

/** The code settings, as the gateway's configuration holds them (`otp`). */
export interface OtpStoreOptions extends OtpLimits {
  secret: string;
  /** Code lifetime, seconds. */
  ttl: number;
  maxAttempts: number;
}

export type OtpStore = ReturnType<typeof createOtpStore>;

/** Where a code goes: the normalized address, and the inbox whose hourly send budget it counts against. */
export interface Recipient {
  email: string;
  mailbox: string;
}

// The fingerprints of the OTP_SECRETs the gateways of this Redis prefix run with, each with when it
// was last told (ms, by the Redis server's clock). With ARGV[3] = 1, records this one's and forgets
// those older than the window; else reads only. Answers how many were told within the window, and
// whether this one was (1 or 0).
const OTP_SECRETS_TOLD = `${REDIS_NOW_LUA}
local now, window, tell = now_ms(), tonumber(ARGV[2]), ARGV[3] == '1'
if tell then redis.call('HSET', KEYS[1], ARGV[1], now) end
local told, seen, ours = redis.call('HGETALL', KEYS[1]), 0, 0
for i = 1, #told, 2 do
  if tonumber(told[i + 1]) <= now - window then
    if tell then redis.call('HDEL', KEYS[1], told[i]) end
  else
    seen = seen + 1
    if told[i] == ARGV[1] then ours = 1 end
  end
end
if tell then redis.call('PEXPIRE', KEYS[1], window) end
return {seen, ours}
`;

const HOUR = 3600;
const DAY = 24 * HOUR;

/**
 * One-time codes in Redis, kept only as HMAC(secret, email + code), one live code per email, with
 * the send and failure limits of each email, inbox and client IP (API.md §7). The keys of one email
 * (or inbox) share the hash tag `{email:…}` and those of one IP `{ip:…}`, so each script runs on one
 * Redis Cluster slot.
 */
export function createOtpStore(redis: RedisClient, options: OtpStoreOptions) {
  const { secret, ttl, maxAttempts, ...limits } = options;
  redis.defineCommand('verifyOtp', { numberOfKeys: 4, lua: VERIFY_OTP });
  redis.defineCommand('storeOtp', { numberOfKeys: 1, lua: STORE_OTP });
  redis.defineCommand('reinstateOtp', { numberOfKeys: 1, lua: REINSTATE_OTP });
  redis.defineCommand('otpSecretsTold', { numberOfKeys: 1, lua: OTP_SECRETS_TOLD });
  const windows = createSlidingWindows(redis);
  const hmac = (purpose: string, value: string) =>
    createHmac('sha256', secret).update(`${purpose}\0${value}`).digest('hex');
  // Keys are keyed hashes of the email, so a Redis dump holds no addresses; IPv6 clients count per /64.
  const emailKey = (kind: string, email: string) => `{email:${hmac('key', email)}}:${kind}`;
  const ipKey = (kind: string, ip: string) => `{ip:${normalizeIP(ip)}}:${kind}`;
  const hashOf = (email: string, code: string) => hmac('code', `${email}\0${code}`);
  // Where the gateways of this prefix tell their secrets' fingerprints: 64 bits of an HMAC under it.
  const fleetKey = 'fleet:otp-secrets';
  const fingerprint = hmac('fleet', 'fingerprint').slice(0, 16);

  const emailFailures = (email: string) => emailKey('failures', email);
  /** The send limits of an address: its cooldown, its inbox's hourly budget, its wrong guesses. */
  const addressWindows = ({ email, mailbox }: Recipient) => {
    const cooldown = {
      name: 'cooldown' as const,
      key: emailKey('sent-recently', email),
      seconds: limits.resendCooldown,
      limit: 1,
    };
    const inbox = {
      name: 'email' as const,
      key: emailKey('sends', mailbox),
      seconds: HOUR,
      limit: limits.maxSendsPerEmailPerHour,
    };
    // No code would be accepted while the email's wrong guesses are at their bound: none is sent.
    const failures = {
      name: 'failures' as const,
      key: emailFailures(email),
      seconds: DAY,
      limit: limits.maxFailuresPerEmailPerDay,
      gate: true,
    };
    return { cooldown, inbox, failures };
  };
  // The hourly budget is the inbox's (victim+1@… counts as victim@…), under the key the inbox's own
  // address has. For most addresses that is the address itself, whose keys share one slot: one script.
  // Another spelling's keys are in another slot than the inbox's, so its budget is a scope of its own.
  const sendScopes = (
    recipient: Recipient,
    ip: string,
  ): Window<'cooldown' | 'email' | 'failures' | 'ip'>[][] => {
    const { cooldown, inbox, failures } = addressWindows(recipient);
    const sender = ipSends(ip);
    return recipient.mailbox === recipient.email
      ? [[cooldown, inbox, failures], [sender]]
      : [[cooldown, failures], [inbox], [sender]];
  };
  const ipSends = (ip: string): Window<'ip'> => ({
    name: 'ip',
    key: ipKey('sends', ip),
    seconds: HOUR,
    limit: limits.maxSendsPerIpPerHour,
  });
  const ipFailures = (ip: string): Window<'ip'> => ({
    name: 'ip',
    key: ipKey('failures', ip),
    seconds: HOUR,
    limit: limits.maxFailuresPerIpPerHour,
  });

  /** A code that could not be sent: it is dropped and does not count against any send limit. */
  async function withdraw(recipient: Recipient, ip: string, event: string) {
    await Promise.all([
      windows.release(sendScopes(recipient, ip).flat(), event),
      redis.del(emailKey('otp', recipient.email)),
    ]);
  }

  async function store(email: string, code: string) {
    await redis.storeOtp(emailKey('otp', email), hashOf(email, code), ttl);
  }

  return {
    /**
     * The email's codes as one series, which names the record of its newest code email beside the
     * mail queue (otp-email.queue.ts): keyed like every key here, so it tells no address.
     */
    seriesOf: (email: string) => hmac('mail-series', email),

    /**
     * Stores a new code for the email, replacing any previous one, unless a send limit refuses it:
     * the email's cooldown, its inbox's hourly cap, its wrong guesses at their daily bound, or the
     * client IP's hourly cap. `nextAfter`: the seconds until the next send would be allowed;
     * `withdraw` undoes it.
     */
    async issue(recipient: Recipient, code: string, ip: string) {
      const scopes = sendScopes(recipient, ip);
      const counted = await windows.hit(scopes);
      if (counted.refusal) return counted;
      try {
        await store(recipient.email, code);
      } catch (error) {
        // Nothing will be sent, so nothing counts (as far as Redis, which may be what failed, lets us).
        await windows.release(scopes.flat(), counted.event).catch(() => {});
        throw error;
      }
      return {
        refusal: undefined,
        nextAfter: counted.nextAfter,
        withdraw: () => withdraw(recipient, ip, counted.event),
      };
    },

    /**
     * Puts an accepted code back (its session could not be created), outside every limit, with the
     * wrong guesses and the end it had: a retry does not lengthen its life or reset its attempts.
     */
    async reinstate(email: string, code: string, { attempts, expiresAt }: AcceptedCode) {
      await redis.reinstateOtp(emailKey('otp', email), hashOf(email, code), attempts, expiresAt);
    },

    /**
     * How many different `OTP_SECRET`s the gateways of this Redis prefix told within `windowMs` (by a
     * fingerprint: 64 bits of an HMAC under it, kept in Redis and never logged), and whether this
     * store's is one of them. With `tell`, this one's is told first, as each gateway's check does:
     * more than one splits the codes and the limits (otp-secret-check.ts). Without, nothing is
     * written: an operator's command given another secret would find none of their keys.
     */
    async secretsTold(windowMs: number, tell: boolean): Promise<{ told: number; ours: boolean }> {
      const [told, ours] = await redis.otpSecretsTold(fleetKey, fingerprint, windowMs, tell ? 1 : 0);
      return { told, ours: ours === 1 };
    },

    /**
     * An operator's lift (limits-cli.ts): forgets the address's wrong codes (and so its lock-out),
     * its inbox's codes sent in the hour and its resend cooldown, so that it may ask for a code and
     * sign in at once. A code it holds stays as it is (a locked one is replaced by the next send), and
     * the client IPs' limits stay. Answers what it forgot, as counted in their windows.
     */
    async lift(recipient: Recipient) {
      const { cooldown, inbox, failures } = addressWindows(recipient);
      const held = await windows.forget([failures, inbox, cooldown]);
      return { wrongCodes: held.failures, codesSent: held.email };
    },

    /**
     * An operator's look (limits-cli.ts show), changing nothing: the address's code (its wrong guesses
     * and the seconds it has left; null when it holds none) and the windows `lift` forgets, as they
     * stand. The client IPs' limits are not the address's.
     */
    async standing(recipient: Recipient) {
      const { cooldown, inbox, failures } = addressWindows(recipient);
      const codeKey = emailKey('otp', recipient.email);
      const [attempts, leftMs, windowsHeld] = await Promise.all([
        redis.hget(codeKey, 'attempts'),
        redis.pttl(codeKey),
        windows.peek([cooldown, inbox, failures]),
      ]);
      const code =
        attempts === null || leftMs < 0
          ? null
          : { wrongGuesses: Number(attempts), maxAttempts, expiresIn: Math.ceil(leftMs / 1000) };
      return { code, ...windowsHeld };
    },

    /**
     * The same look at a client IP's own limits, counted per IPv4 address or IPv6 /64 (`countedAs`):
     * the codes it asked for and its wrong codes, in the hour.
     */
    async ipStanding(ip: string) {
      const held = await windows.peek([
        { ...ipSends(ip), name: 'sends' as const },
        { ...ipFailures(ip), name: 'wrongCodes' as const },
      ]);
      return { countedAs: normalizeIP(ip), ...held };
    },

    /**
     * The IP's failure budget lives in another slot than the code, so the code's script cannot check
     * it. Each guess takes a failure from it first and gives it back unless the guess was wrong:
     * guesses racing from one address are never evaluated more often than its budget allows (at
     * worst one is refused while another's failure is being given back). When the IP's budget is
     * spent, its wait is told even if the email's would be longer; the next try tells that one.
     */
    async verify(email: string, code: string, ip: string): Promise<VerifyOutcome> {
      const taken = await windows.hit([[ipFailures(ip)]]);
      if (taken.refusal) return { result: 'limited', refusal: taken.refusal };
      const failures = emailFailures(email);
      // n: attempts left (wrong), the wait in ms (limited) or the wrong guesses (ok); m: the email's
      // wait in ms (wrong), whether this is the first refusal (limited) or the code's end (ok).
      const [result, n, m] = await redis.verifyOtp(
        emailKey('otp', email),
        failures,
        refusedKey(failures),
        emailKey('sent-recently', email),
        hashOf(email, code),
        maxAttempts,
        taken.event,
        DAY * 1000,
        limits.maxFailuresPerEmailPerDay,
      );
      // Not worth failing an answer that may already have consumed the code: a failure left counted
      // only makes the IP's budget stricter.
      if (result !== 'wrong') await windows.release([ipFailures(ip)], taken.event).catch(() => {});
      switch (result) {
        case 'wrong': {
          const lockedOut: LockOut[] = [];
          if (n === 0) lockedOut.push('code');
          if (m > 0) lockedOut.push('email');
          if (taken.filled.length > 0) lockedOut.push('ip');
          return {
            result,
            attemptsLeft: n,
            lockedOut,
            ...(m > 0 && { emailRetryAfter: Math.ceil(m / 1000) }),
          };
        }
        case 'limited':
          return { result, refusal: { window: 'email', retryAfter: Math.ceil(n / 1000), first: m === 1 } };
        case 'ok':
          return { result, accepted: { attempts: n, expiresAt: m } };
        case 'locked':
        case 'missing':
          return { result };
        default:
          throw new Error(`unexpected verifyOtp result ${result}`);
      }
    },
  };
}
