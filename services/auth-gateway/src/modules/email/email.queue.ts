import { EMAIL_JOB_OPTIONS, type EmailJobName, type EmailJobs } from '@tessera/contracts';
import type { Queue } from 'bullmq';

export type EmailQueue = ReturnType<typeof createEmailQueue>;

/**
 * The gateway's side of the email contract: a job of the `email` queue, by name, with the contract's
 * delivery policy (the mailer retries it until its deadline) and an id that makes a repeated enqueue
 * a no-op. The queue carries the caller's trace context to the mailer.
 */
export function createEmailQueue(queue: Queue) {
  return {
    /** Resolves once the job is stored in Redis (not once the mail is sent). */
    async add<N extends EmailJobName>(name: N, data: EmailJobs[N], jobId: string): Promise<void> {
      await queue.add(name, data, { ...EMAIL_JOB_OPTIONS, jobId });
    },
    /** Takes a job back while it waits (to be sent, or to be retried); one being sent stays. */
    async withdraw(jobId: string): Promise<void> {
      await queue.remove(jobId);
    },
  };
}
