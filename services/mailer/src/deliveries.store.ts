import {
  DEADLINE_MARGIN_MS,
  deliveredKey,
  type EmailJobName,
  type EmailJobs,
  newestKeyOf,
} from '@tessera/contracts';
import type { RedisClient } from '@tessera/redis';

/**
 * Which jobs SMTP has accepted, by their deterministic id, so a job run again after a crash (between
 * the acceptance and the job's completion) is not sent twice. The keys share `BULLMQ_PREFIX`, hash tag
 * included, so they sit in the queue's cluster slot.
 */
export function createDeliveriesStore(redis: RedisClient, prefix: string) {
  const key = (jobId: string) => deliveredKey(prefix, jobId);
  return {
    async wasDelivered(jobId: string): Promise<boolean> {
      return (await redis.exists(key(jobId))) === 1;
    },
    /**
     * Whether the gateway recorded this code or deletion notice as its recipient's newest, and a
     * later one since (newestKeyOf).
     */
    async wasReplaced(jobId: string, data: EmailJobs[EmailJobName]): Promise<boolean> {
      const key = newestKeyOf(prefix, jobId, data);
      if (key === undefined) return false;
      const [newest, recorded] = await redis.hmget(key, 'newest', jobId);
      return recorded !== null && newest !== null && newest !== jobId;
    },
    /** Records the acceptance until the job's deadline has passed: then no mailer would send it anyway. */
    async recordDelivered(jobId: string, deadline: number, now: number): Promise<void> {
      await redis.set(key(jobId), String(now), 'PX', Math.max(deadline - now, 0) + DEADLINE_MARGIN_MS, 'NX');
    },
  };
}
