import { createHmac } from 'node:crypto';
import type { Redis, Result } from 'ioredis';

export type VerifyOutcome =
  | { result: 'ok' }
  | { result: 'wrong'; attemptsLeft: number }
  | { result: 'locked' }
  | { result: 'missing' };

declare module 'ioredis' {
  interface RedisCommander<Context> {
    verifyOtp(key: string, codeHash: string, maxAttempts: number): Result<[string, number], Context>;
  }
}

// Atomic check-and-consume: the right code deletes the entry (single use under any concurrency),
// a wrong one counts an attempt, and a code with maxAttempts failures is locked until replaced.
// The comparison walks the whole hash whatever matches, so its time tells nothing.
const VERIFY_OTP = `
local stored = redis.call('HGET', KEYS[1], 'hash')
if not stored then return {'missing', 0} end
local max = tonumber(ARGV[2])
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts'))
if attempts >= max then return {'locked', 0} end
local given = ARGV[1]
local diff = (#stored == #given) and 0 or 1
for i = 1, math.min(#stored, #given) do
  diff = bit.bor(diff, bit.bxor(string.byte(stored, i), string.byte(given, i)))
end
if diff == 0 then
  redis.call('DEL', KEYS[1])
  return {'ok', 0}
end
attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
return {'wrong', max - attempts}
`;

export interface OtpStoreOptions {
  secret: string;
  ttlSeconds: number;
  maxAttempts: number;
}

export type OtpStore = ReturnType<typeof createOtpStore>;

/** One-time codes in Redis, kept only as HMAC(secret, email + code), one live code per email. */
export function createOtpStore(redis: Redis, { secret, ttlSeconds, maxAttempts }: OtpStoreOptions) {
  redis.defineCommand('verifyOtp', { numberOfKeys: 1, lua: VERIFY_OTP });
  const hmac = (purpose: string, value: string) =>
    createHmac('sha256', secret).update(`${purpose}\0${value}`).digest('hex');
  // The key is keyed-hashed too, so a Redis dump holds no email addresses.
  const keyOf = (email: string) => `otp:${hmac('key', email)}`;
  const hashOf = (email: string, code: string) => hmac('code', `${email}\0${code}`);

  return {
    /** Stores a new code for the email, replacing any previous one. */
    async issue(email: string, code: string): Promise<void> {
      const key = keyOf(email);
      await redis
        .multi()
        .del(key)
        .hset(key, { hash: hashOf(email, code), attempts: 0 })
        .expire(key, ttlSeconds)
        .exec();
    },

    async verify(email: string, code: string): Promise<VerifyOutcome> {
      const [result, attemptsLeft] = await redis.verifyOtp(keyOf(email), hashOf(email, code), maxAttempts);
      if (result === 'wrong') return { result, attemptsLeft };
      if (result === 'ok' || result === 'locked' || result === 'missing') return { result };
      throw new Error(`unexpected verifyOtp result ${result}`);
    },
  };
}
