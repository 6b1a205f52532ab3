import { createHmac, randomUUID } from 'node:crypto';
import { normalizeIP } from '@fastify/rate-limit';
import type { Redis, Result } from 'ioredis';
import type { Clock } from '../../clock.ts';
import { createSlidingWindows, type Refusal, SLIDING_WINDOW_LUA } from '../limits/sliding-window.ts';

export type VerifyOutcome =
  | { result: 'ok' }
  /** `lockedOut`: what this wrong guess has just locked (the code, the email's or the IP's budget). */
  | { result: 'wrong'; attemptsLeft: number; lockedOut: LockOut[] }
  | { result: 'locked' }
  | { result: 'missing' }
  | { result: 'limited'; refusal: Refusal<'email' | 'ip'> };

export type LockOut = 'code' | 'email' | 'ip';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    verifyOtp(...args: (string | number)[]): Result<[string, number, number, number], Context>;
  }
}

// Atomic check-and-consume: the right code deletes the entry (single use under any concurrency),
// a wrong one counts an attempt on the code and a failure in the email's and the IP's windows,
// a code with maxAttempts failures is locked until replaced, and a full window refuses every
// verification before the code is even looked at. The comparison walks the whole hash whatever
// matches, so its time tells nothing.
const VERIFY_OTP = `${SLIDING_WINDOW_LUA}
local code_key, email_key, ip_key = KEYS[1], KEYS[2], KEYS[3]
local given, max = ARGV[1], tonumber(ARGV[2])
local now, member = tonumber(ARGV[3]), ARGV[4]
local email_window, email_limit = tonumber(ARGV[5]), tonumber(ARGV[6])
local ip_window, ip_limit = tonumber(ARGV[7]), tonumber(ARGV[8])

-- When both are full, the one that frees up last is the true wait.
local email_wait = wait_ms(email_key, now, email_window, email_limit)
local ip_wait = wait_ms(ip_key, now, ip_window, ip_limit)
if email_wait > 0 and email_wait >= ip_wait then
  return {'limited-email', email_wait, first_refusal(email_key, email_wait), 0}
end
if ip_wait > 0 then return {'limited-ip', ip_wait, first_refusal(ip_key, ip_wait), 0} end

local stored = redis.call('HGET', code_key, 'hash')
if not stored then return {'missing', 0, 0, 0} end
local attempts = tonumber(redis.call('HGET', code_key, 'attempts'))
if attempts >= max then return {'locked', 0, 0, 0} end
local diff = (#stored == #given) and 0 or 1
for i = 1, math.min(#stored, #given) do
  diff = bit.bor(diff, bit.bxor(string.byte(stored, i), string.byte(given, i)))
end
if diff == 0 then
  redis.call('DEL', code_key)
  return {'ok', 0, 0, 0}
end
attempts = redis.call('HINCRBY', code_key, 'attempts', 1)
record(email_key, now, email_window, member)
record(ip_key, now, ip_window, member)
local email_full = wait_ms(email_key, now, email_window, email_limit) > 0 and 1 or 0
local ip_full = wait_ms(ip_key, now, ip_window, ip_limit) > 0 and 1 or 0
return {'wrong', max - attempts, email_full, ip_full}
`;

export interface OtpLimits {
  resendCooldown: number;
  maxSendsPerEmailPerHour: number;
  maxSendsPerIpPerHour: number;
  maxFailuresPerEmailPerDay: number;
  maxFailuresPerIpPerHour: number;
}

export interface OtpStoreOptions {
  secret: string;
  ttlSeconds: number;
  maxAttempts: number;
  limits: OtpLimits;
}

export type OtpStore = ReturnType<typeof createOtpStore>;

const HOUR = 3600;
const DAY = 24 * HOUR;

/**
 * One-time codes in Redis, kept only as HMAC(secret, email + code), one live code per email, with
 * the send and failure limits of each email and client IP (API.md §7).
 */
export function createOtpStore(redis: Redis, clock: Clock, options: OtpStoreOptions) {
  const { secret, ttlSeconds, maxAttempts, limits } = options;
  redis.defineCommand('verifyOtp', { numberOfKeys: 3, lua: VERIFY_OTP });
  const windows = createSlidingWindows(redis, clock);
  const hmac = (purpose: string, value: string) =>
    createHmac('sha256', secret).update(`${purpose}\0${value}`).digest('hex');
  // Keys are keyed hashes of the email, so a Redis dump holds no addresses; IPv6 clients count per /64.
  const emailKey = (kind: string, email: string) => `${kind}:${hmac('key', email)}`;
  const ipKey = (kind: string, ip: string) => `${kind}:${normalizeIP(ip)}`;
  const hashOf = (email: string, code: string) => hmac('code', `${email}\0${code}`);

  const sendWindows = (email: string, ip: string) => [
    {
      name: 'cooldown' as const,
      key: emailKey('sent-recently', email),
      seconds: limits.resendCooldown,
      limit: 1,
    },
    {
      name: 'email' as const,
      key: emailKey('sends', email),
      seconds: HOUR,
      limit: limits.maxSendsPerEmailPerHour,
    },
    { name: 'ip' as const, key: ipKey('sends-ip', ip), seconds: HOUR, limit: limits.maxSendsPerIpPerHour },
  ];

  /** A code that could not be sent: it is dropped and does not count against any send limit. */
  async function withdraw(email: string, ip: string, event: string) {
    await Promise.all([windows.release(sendWindows(email, ip), event), redis.del(emailKey('otp', email))]);
  }

  async function store(email: string, code: string) {
    const key = emailKey('otp', email);
    await redis
      .multi()
      .del(key)
      .hset(key, { hash: hashOf(email, code), attempts: 0 })
      .expire(key, ttlSeconds)
      .exec();
  }

  return {
    /**
     * Stores a new code for the email, replacing any previous one, unless a send limit refuses it:
     * the email's cooldown, its hourly cap or the client IP's hourly cap. `withdraw` undoes it.
     */
    async issue(email: string, code: string, ip: string) {
      const counted = await windows.hit(sendWindows(email, ip));
      if (counted.refusal) return counted;
      await store(email, code);
      return { refusal: undefined, withdraw: () => withdraw(email, ip, counted.event) };
    },

    /** Puts an accepted code back (its session could not be created), outside every limit. */
    reinstate: store,

    async verify(email: string, code: string, ip: string): Promise<VerifyOutcome> {
      const [result, n, emailFlag, ipFlag] = await redis.verifyOtp(
        emailKey('otp', email),
        emailKey('failures', email),
        ipKey('failures-ip', ip),
        hashOf(email, code),
        maxAttempts,
        clock.now().getTime(),
        randomUUID(),
        DAY * 1000,
        limits.maxFailuresPerEmailPerDay,
        HOUR * 1000,
        limits.maxFailuresPerIpPerHour,
      );
      switch (result) {
        case 'wrong': {
          const lockedOut: LockOut[] = [];
          if (n === 0) lockedOut.push('code');
          if (emailFlag) lockedOut.push('email');
          if (ipFlag) lockedOut.push('ip');
          return { result, attemptsLeft: n, lockedOut };
        }
        case 'limited-email':
        case 'limited-ip': {
          const window = result === 'limited-email' ? 'email' : 'ip';
          return {
            result: 'limited',
            refusal: { window, retryAfter: Math.ceil(n / 1000), first: emailFlag === 1 },
          };
        }
        case 'ok':
        case 'locked':
        case 'missing':
          return { result };
        default:
          throw new Error(`unexpected verifyOtp result ${result}`);
      }
    },
  };
}
