import { randomUUID } from 'node:crypto';
import type { Redis, Result } from 'ioredis';
import type { Clock } from '../../clock.ts';

/**
 * Sliding-window logs in Redis: each limited thing is a sorted set of event times (ms, from the
 * gateway's clock), so "at most N in any rolling window" holds exactly, across every gateway process
 * sharing the Redis. Other scripts embed these functions to check and count in the same atomic step.
 */
export const SLIDING_WINDOW_LUA = `
-- Milliseconds until the log at key holds fewer than limit events of the last window ms (0: now).
local function wait_ms(key, now, window, limit)
  if window <= 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) < limit then return 0 end
  local blocking = redis.call('ZRANGE', key, -limit, -limit, 'WITHSCORES')
  return math.max(1, tonumber(blocking[2]) + window - now)
end

local function record(key, now, window, member)
  if window <= 0 then return end
  redis.call('ZADD', key, now, member)
  redis.call('PEXPIRE', key, window)
end

-- Whether this is the first refusal of the key within its wait: the event is recorded once, not per request.
local function first_refusal(key, wait)
  return redis.call('SET', key .. ':refused', '1', 'NX', 'PX', wait) and 1 or 0
end
`;

// Checks every window; counts the event in all of them only when none is full. A refusal names the
// window that frees up last, so its wait is the true time until the event would be allowed.
const HIT = `${SLIDING_WINDOW_LUA}
local now = tonumber(ARGV[1])
local longest, wait = 0, 0
for i = 1, #KEYS do
  local w = wait_ms(KEYS[i], now, tonumber(ARGV[2 * i + 1]), tonumber(ARGV[2 * i + 2]))
  if w > wait then longest, wait = i, w end
end
if wait > 0 then return {longest, wait, first_refusal(KEYS[longest], wait)} end
for i = 1, #KEYS do record(KEYS[i], now, tonumber(ARGV[2 * i + 1]), ARGV[2]) end
return {0, 0, 0}
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    hitWindows(...args: (string | number)[]): Result<[number, number, number], Context>;
  }
}

export interface Window<Name extends string = string> {
  /** What the window limits (named in the refusal). */
  name: Name;
  key: string;
  seconds: number;
  limit: number;
}

export type Refusal<Name extends string = string> = {
  window: Name;
  /** Whole seconds until the request would be allowed. */
  retryAfter: number;
  /** The first refusal of this window since it filled up (record it once, not per request). */
  first: boolean;
};

export type SlidingWindows = ReturnType<typeof createSlidingWindows>;

export function createSlidingWindows(redis: Redis, clock: Clock) {
  redis.defineCommand('hitWindows', { lua: HIT });
  return {
    /**
     * Counts one event in every window, or none when any of them is full: the refusal, or the id of
     * the event counted (to take it back with `release` when what it stood for did not happen).
     */
    async hit<Name extends string>(
      windows: Window<Name>[],
    ): Promise<{ refusal: Refusal<Name> } | { refusal: undefined; event: string }> {
      const event = randomUUID();
      const [index, waitMs, first] = await redis.hitWindows(
        windows.length,
        ...windows.map((w) => w.key),
        clock.now().getTime(),
        event,
        ...windows.flatMap((w) => [w.seconds * 1000, w.limit]),
      );
      const refused = windows[index - 1];
      if (!refused) return { refusal: undefined, event };
      return { refusal: { window: refused.name, retryAfter: Math.ceil(waitMs / 1000), first: first === 1 } };
    },

    /** Takes a counted event back out of its windows. */
    async release(windows: Window[], event: string): Promise<void> {
      await Promise.all(windows.map((w) => redis.zrem(w.key, event)));
    },
  };
}
