import {
  DEADLINE_MARGIN_MS,
  EMAIL_JOB_OPTIONS,
  type EmailJobName,
  type EmailJobs,
  newestKeyOf,
} from '@tessera/contracts';
import type { RedisClient } from '@tessera/redis';
import type { Queue } from 'bullmq';

export type EmailQueue = ReturnType<typeof createEmailQueue>;

/**
 * The gateway's side of the email contract: a job of the `email` queue, by name, with the contract's
 * delivery policy (the mailer retries it until its deadline) and an id that makes a repeated enqueue
 * a no-op. The queue carries the caller's trace context to the mailer.
 */
export function createEmailQueue(queue: Queue, redis: RedisClient, prefix: string) {
  return {
    /**
     * Resolves once the job is stored in Redis (not once the mail is sent). A code or an account
     * notice is first recorded as its recipient's newest, kept `lifetimeMs` (how long it may be
     * retried) and a margin: one queued before, still waiting to be sent or retried, is then not sent
     * (the mailer checks before every attempt).
     */
    async add<N extends EmailJobName>(name: N, data: EmailJobs[N], jobId: string, lifetimeMs: number) {
      const key = newestKeyOf(prefix, name, jobId, data.to);
      if (key !== undefined)
        await redis
          .multi()
          .hset(key, 'newest', jobId, jobId, '1')
          .pexpire(key, lifetimeMs + DEADLINE_MARGIN_MS)
          .exec();
      await queue.add(name, data, { ...EMAIL_JOB_OPTIONS, jobId });
    },
  };
}
