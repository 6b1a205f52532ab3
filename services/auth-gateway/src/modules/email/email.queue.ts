import {
  DEADLINE_MARGIN_MS,
  EMAIL_JOB_OPTIONS,
  type EmailJobName,
  type EmailJobs,
  NOTICE_RETRY_WINDOW_MS,
  noticesKey,
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
  /** Resolves once the job is stored in Redis (not once the mail is sent). */
  async function add<N extends EmailJobName>(name: N, data: EmailJobs[N], jobId: string): Promise<void> {
    await queue.add(name, data, { ...EMAIL_JOB_OPTIONS, jobId });
  }
  return {
    add,
    /**
     * Queues a notice of the account's deletion as its user's newest: one queued before, still
     * waiting to be sent or retried, is then not sent (the mailer checks before every attempt).
     */
    async addNotice<N extends EmailJobName>(name: N, data: EmailJobs[N], jobId: string, userId: string) {
      const key = noticesKey(prefix, userId);
      await redis
        .multi()
        .hset(key, 'newest', jobId, jobId, '1')
        .pexpire(key, NOTICE_RETRY_WINDOW_MS + DEADLINE_MARGIN_MS)
        .exec();
      await add(name, data, jobId);
    },
  };
}
