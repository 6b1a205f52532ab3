import { randomUUID } from 'node:crypto';
import { REDIS_NOW_LUA, type RedisClient } from '@tessera/redis';
import type { Result } from 'ioredis';

/**
 * Sliding-window logs in Redis: each limited thing is a sorted set of event times (ms, by the Redis
 * server's clock, so gateways whose clocks disagree still count the same windows), so "at most N in
 * any rolling window" holds exactly, across every gateway process sharing the Redis. Other scripts
 * embed these functions to check and count in the same atomic step.
 */
export const SLIDING_WINDOW_LUA = `${REDIS_NOW_LUA}
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

-- Whether this is the first refusal of a window within its wait: the event is recorded once, not per request.
local function first_refusal(refused_key, wait)
  return redis.call('SET', refused_key, '1', 'NX', 'PX', wait) and 1 or 0
end
`;

/** The key that marks a window's refusal as already told (see `first_refusal`); it shares the log's hash tag. */
export const refusedKey = (key: string) => `${key}:refused`;
/** The same for the log's refusals as a gate, told apart from those of the events it counts. */
const gateRefusedKey = (key: string) => refusedKey(`${key}:gate`);

// Checks every window (KEYS: the logs, then their refusal markers); counts the event in all of them
// but the gates only when none is full, and answers which ones it filled and when the last of them
// frees up. A refusal names the window that frees up last, so its wait is the true time until the
// event would be allowed.
const HIT = `${SLIDING_WINDOW_LUA}
local n, now, member = #KEYS / 2, now_ms(), ARGV[1]
local longest, wait = 0, 0
for i = 1, n do
  local w = wait_ms(KEYS[i], now, tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]))
  if w > wait then longest, wait = i, w end
end
if wait > 0 then return {longest, wait, first_refusal(KEYS[n + longest], wait), {}} end
local filled = {}
for i = 1, n do
  local window, limit = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  if ARGV[3 * i + 1] == '1' then
    record(KEYS[i], now, window, member)
    local w = wait_ms(KEYS[i], now, window, limit)
    if w > 0 then filled[#filled + 1] = i end
    if w > wait then wait = w end
  end
end
return {0, wait, 0, filled}
`;

// Forgets a window (KEYS: its log and the markers of its refusals, counted and as a gate), answering
// how many events it held within its last ARGV[1] ms.
const FORGET = `${SLIDING_WINDOW_LUA}
local held = redis.call('ZCOUNT', KEYS[1], now_ms() - tonumber(ARGV[1]), '+inf')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return held
`;

// Reads a window (KEYS[1], its log) without changing it: how many events it holds within its last
// ARGV[1] ms, and the ms until it holds fewer than ARGV[2] (0: now), as wait_ms counts them.
const PEEK = `${SLIDING_WINDOW_LUA}
local now, window, limit = now_ms(), tonumber(ARGV[1]), tonumber(ARGV[2])
if window <= 0 then return {0, 0} end
local held = redis.call('ZCOUNT', KEYS[1], '(' .. (now - window), '+inf')
if held < limit then return {held, 0} end
local blocking = redis.call('ZRANGE', KEYS[1], -limit, -limit, 'WITHSCORES')
return {held, math.max(1, tonumber(blocking[2]) + window - now)}
`;

type Hit = [number, number, number, number[]];
declare module 'ioredis' {
  interface RedisCommander<Context> {
    forgetWindow(
      log: string,
      refused: string,
      gateRefused: string,
      windowMs: number,
    ): Result<number, Context>;
    peekWindow(log: string, windowMs: number, limit: number): Result<[number, number], Context>;
    /** HIT for 1, 2 or 3 windows: 2, 4 or 6 keys. */
    hitWindows1(...args: (string | number)[]): Result<Hit, Context>;
    hitWindows2(...args: (string | number)[]): Result<Hit, Context>;
    hitWindows3(...args: (string | number)[]): Result<Hit, Context>;
  }
}

export interface Window<Name extends string = string> {
  /** What the window limits (named in the refusal). */
  name: Name;
  key: string;
  seconds: number;
  limit: number;
  /** Checked, not counted in: a window of other events that refuses this one while it is full. */
  gate?: boolean;
}

export type Refusal<Name extends string = string> = {
  window: Name;
  /** Whole seconds until the request would be allowed. */
  retryAfter: number;
  /** The first refusal of this window since it filled up (record it once, not per request). */
  first: boolean;
};

/** A window as `peek` reads it. */
export interface Standing {
  held: number;
  limit: number;
  /** Whole seconds until the window would take another event (0: now). */
  retryAfter: number;
}

export function createSlidingWindows(redis: RedisClient) {
  // One command per number of windows, its number of keys fixed: a Redis Cluster client's
  // auto-pipelining groups a command by its first argument, which must then be a key, not the count
  // (commands on different nodes would otherwise share a pipeline, which the client refuses).
  const COMMANDS = ['hitWindows1', 'hitWindows2', 'hitWindows3'] as const;
  for (const [i, name] of COMMANDS.entries())
    redis.defineCommand(name, { numberOfKeys: (i + 1) * 2, lua: HIT });
  redis.defineCommand('forgetWindow', { numberOfKeys: 3, lua: FORGET });
  redis.defineCommand('peekWindow', { numberOfKeys: 1, lua: PEEK });
  function hitWindows(count: number) {
    const name = COMMANDS[count - 1];
    if (name === undefined) throw new Error(`a scope holds 1 to ${COMMANDS.length} windows, not ${count}`);
    return (...args: (string | number)[]) => redis[name](...args);
  }

  /** One script: the windows of one scope, whose keys share a hash tag (a cluster slot). */
  async function hitScope<Name extends string>(windows: Window<Name>[], event: string) {
    const [index, waitMs, first, filled] = await hitWindows(windows.length)(
      ...windows.map((w) => w.key),
      ...windows.map((w) => (w.gate ? gateRefusedKey(w.key) : refusedKey(w.key))),
      event,
      ...windows.flatMap((w) => [w.seconds * 1000, w.limit, w.gate ? 0 : 1]),
    );
    const refused = windows[index - 1];
    return {
      waitMs,
      refusal: refused && { window: refused.name, retryAfter: Math.ceil(waitMs / 1000), first: first === 1 },
      filled: filled.map((i) => windows[i - 1]?.name as Name),
    };
  }

  async function release(windows: Window[], event: string): Promise<void> {
    await Promise.all(windows.filter((w) => !w.gate).map((w) => redis.zrem(w.key, event)));
  }

  return {
    /**
     * Counts one event in every window but the gates, or in none when any is full: the refusal (of the
     * window that frees up last), or the id of the event counted (to take it back with `release`
     * when what it stood for did not happen), the windows it has just filled and the whole seconds
     * until the next event would be allowed (0 when it would be now).
     *
     * `scopes` groups the windows by hash tag: a script may only touch keys of one Redis Cluster
     * slot, so each group is checked and counted atomically by one script, the groups side by side.
     * When a group refuses, or fails (its Redis node down), the event is taken back out of the
     * others: no window ever holds more than its limit or an event that did not happen, and a request
     * racing with the take-back is at worst refused, never let through.
     */
    async hit<Name extends string>(
      scopes: Window<Name>[][],
    ): Promise<
      { refusal: Refusal<Name> } | { refusal: undefined; event: string; filled: Name[]; nextAfter: number }
    > {
      const event = randomUUID();
      const settled = await Promise.allSettled(scopes.map((windows) => hitScope(windows, event)));
      const results = settled.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
      // The windows this event was counted in: those of every group that neither refused nor failed.
      const counted = scopes.flatMap((windows, i) => {
        const outcome = settled[i];
        return outcome?.status === 'fulfilled' && !outcome.value.refusal ? windows : [];
      });
      const failed = settled.find((outcome) => outcome.status === 'rejected');
      if (failed) {
        await release(counted, event).catch(() => {});
        throw failed.reason;
      }
      const refused = results.filter((r) => r.refusal).sort((a, b) => b.waitMs - a.waitMs)[0];
      if (!refused?.refusal) {
        const waitMs = Math.max(0, ...results.map((r) => r.waitMs));
        return {
          refusal: undefined,
          event,
          filled: results.flatMap((r) => r.filled),
          nextAfter: Math.ceil(waitMs / 1000),
        };
      }
      await release(counted, event);
      return { refusal: refused.refusal };
    },

    /** Takes a counted event back out of its windows. */
    release,

    /**
     * Forgets the windows with every refusal told of them (an operator's lift), each at once, by one
     * script of its own (they may be of different Redis Cluster slots). Answers how many events each
     * held within its window, by name.
     */
    async forget<Name extends string>(windows: Window<Name>[]): Promise<Record<Name, number>> {
      const held = await Promise.all(
        windows.map((w) =>
          redis.forgetWindow(w.key, refusedKey(w.key), gateRefusedKey(w.key), w.seconds * 1000),
        ),
      );
      return Object.fromEntries(windows.map((w, i) => [w.name, held[i]])) as Record<Name, number>;
    },

    /**
     * What the windows hold, changing nothing (an operator's look), each by a script of its own: by
     * name, the events within the window, its limit, and the whole seconds until it would take one
     * more (0: now).
     */
    async peek<Name extends string>(windows: Window<Name>[]): Promise<Record<Name, Standing>> {
      const peeked = await Promise.all(
        windows.map((w) => redis.peekWindow(w.key, w.seconds * 1000, w.limit)),
      );
      return Object.fromEntries(
        windows.map((w, i) => {
          const [held, waitMs] = peeked[i] ?? [0, 0];
          return [w.name, { held, limit: w.limit, retryAfter: Math.ceil(waitMs / 1000) }];
        }),
      ) as Record<Name, Standing>;
    },
  };
}
