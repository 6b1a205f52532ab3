import {
  codesKey,
  DEADLINE_MARGIN_MS,
  deliveredKey,
  EMAIL_JOB_OPTIONS,
  type EmailJobName,
  type EmailJobs,
  newestKeyOf,
} from '@tessera/contracts';
import { REDIS_NOW_LUA, type RedisClient } from '@tessera/redis';
import type { Queue } from 'bullmq';
import type { FastifyBaseLogger } from 'fastify';
import type { Result } from 'ioredis';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    recordNewest(key: string, jobId: string, ttlMs: number): Result<unknown, Context>;
  }
}

/**
 * The job as its recipient's newest, and as one recorded until its record expires (the field's
 * value, ms since the epoch); the hash kept as long as that. A record expired a lifetime ago goes:
 * its job is past its deadline, even as a gateway whose clock runs that far ahead of the Redis
 * server's set it; and a recipient who never pauses for a whole lifetime (a deletion requested and
 * cancelled again and again) would otherwise keep every record ever made. Timed by the Redis
 * server's clock, as the hash's expiry is. A record of an earlier version (`1`) tells no expiry and
 * stays as long as the hash.
 */
const RECORD_NEWEST = `${REDIS_NOW_LUA}
local now = now_ms()
local lifetime = tonumber(ARGV[2])
local records = redis.call('HGETALL', KEYS[1])
for i = 1, #records, 2 do
  local expires = tonumber(records[i + 1])
  if records[i] ~= 'newest' and expires and expires > 1 and expires + lifetime <= now then
    redis.call('HDEL', KEYS[1], records[i])
  end
end
redis.call('HSET', KEYS[1], 'newest', ARGV[1], ARGV[1], string.format('%.0f', now + lifetime))
redis.call('PEXPIRE', KEYS[1], lifetime)
`;

export type EmailQueue = ReturnType<typeof createEmailQueue>;

/**
 * The gateway's side of the email contract: a job of the `email` queue, by name, with the contract's
 * delivery policy (the mailer retries it until its deadline) and an id that makes a repeated enqueue
 * a no-op. The queue carries the caller's trace context to the mailer.
 */
export function createEmailQueue(queue: Queue, redis: RedisClient, prefix: string, log: FastifyBaseLogger) {
  redis.defineCommand('recordNewest', { numberOfKeys: 1, lua: RECORD_NEWEST });
  return {
    /**
     * Resolves once the job is stored in Redis (not once the mail is sent). A code or an account
     * notice is then recorded as its recipient's newest, kept `lifetimeMs` (how long it may be
     * retried) and a margin: one queued before, still waiting to be sent or retried, is then not
     * sent (the mailer checks before every attempt). Recorded only once queued, so that the newest
     * recorded is always a job that exists; a job whose record is not there yet is sent.
     */
    async add<N extends EmailJobName>(name: N, data: EmailJobs[N], jobId: string, lifetimeMs: number) {
      await queue.add(name, data, { ...EMAIL_JOB_OPTIONS, jobId });
      const key = newestKeyOf(prefix, jobId, data);
      if (key === undefined) return;
      // Without it, an older email still being retried is sent too: not worth failing the request.
      await redis
        .recordNewest(key, jobId, lifetimeMs + DEADLINE_MARGIN_MS)
        .catch((err: unknown) =>
          log.warn({ err, jobId }, 'could not record the newest email of its recipient'),
        );
    },
  };
}

type QueuedState = 'waiting' | 'active' | 'delayed' | 'failed' | 'gone';
/**
 * Where an address's newest code email stands: accepted by the SMTP server (when), or its job's state
 * in the queue, its attempts and the last one's error (the SMTP server's reply, on one line); `gone`
 * when the job is no longer in the queue and no delivery of it is recorded.
 */
export type CodeEmailStanding =
  | { jobId: string; state: 'accepted'; acceptedAt: string }
  | {
      jobId: string;
      state: QueuedState;
      queuedAt: string | null;
      attemptsMade: number;
      lastError: string | null;
    };

/**
 * The newest code email queued for an address's `series` while its record lasts (the code's lifetime
 * and a minute), for an operator's look (limits:show); null when none is recorded. Never its code.
 */
export async function newestCodeEmail(
  queue: Queue,
  redis: RedisClient,
  prefix: string,
  series: string,
): Promise<CodeEmailStanding | null> {
  const jobId = await redis.hget(codesKey(prefix, series), 'newest');
  if (jobId === null) return null;
  // The job first: one delivered meanwhile is recorded before its job is removed.
  const [state, job] = await Promise.all([queue.getJobState(jobId), queue.getJob(jobId)]);
  const accepted = await redis.get(deliveredKey(prefix, jobId));
  if (accepted !== null)
    return { jobId, state: 'accepted', acceptedAt: new Date(Number(accepted)).toISOString() };
  return {
    jobId,
    state: STATES[state] ?? 'gone',
    queuedAt: job ? new Date(job.timestamp).toISOString() : null,
    attemptsMade: job?.attemptsMade ?? 0,
    // A server's reply may span lines, or hold control or format (bidi) characters meant for no terminal.
    lastError: job?.failedReason ? job.failedReason.replaceAll(/[\s\p{Cc}\p{Cf}]+/gu, ' ').trim() : null,
  };
}

const STATES: Partial<Record<string, QueuedState>> = {
  waiting: 'waiting',
  prioritized: 'waiting',
  active: 'active',
  delayed: 'delayed',
  failed: 'failed',
};
