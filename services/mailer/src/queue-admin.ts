import { REDACTED_CODE, SEND_OTP_JOB, type SendOtpJobData } from '@tessera/contracts';
import type { Job, Queue } from 'bullmq';
import { isMasked, maskEmail } from './mask.ts';

/** What `queue:status` shows. Never a code: a job's data is read for its recipient and expiry only. */
export interface QueueStatus {
  counts: { waiting: number; active: number; delayed: number; failed: number; completed: number };
  /** Age of the oldest waiting job in seconds, null when none waits. */
  oldestWaitingSeconds: number | null;
  /** The most recent failures first. */
  lastFailures: Array<{
    id: string;
    attemptsMade: number;
    failedReason: string;
    finishedAt: string | null;
    to: string;
  }>;
}

export interface RetryReport {
  retried: number;
  /** Not retried: the code has expired, so the email would carry a dead code. */
  skippedExpired: number;
  /** Not retried: its code or address was redacted when the job failed for good, so it cannot be sent. */
  skippedRedacted: number;
}

type EmailQueue = Queue<SendOtpJobData>;

const FAILURES_SHOWN = 10;
const PAGE = 500;

export async function queueStatus(queue: EmailQueue, now: Date): Promise<QueueStatus> {
  const [counts, [oldest], failures] = await Promise.all([
    queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed'),
    // The wait list is oldest last; ascending order starts with it.
    queue.getJobs(['waiting'], 0, 0, true),
    queue.getFailed(0, FAILURES_SHOWN - 1),
  ]);
  return {
    counts: {
      waiting: counts.waiting ?? 0,
      active: counts.active ?? 0,
      delayed: counts.delayed ?? 0,
      failed: counts.failed ?? 0,
      completed: counts.completed ?? 0,
    },
    oldestWaitingSeconds: oldest ? Math.max(0, Math.round((now.getTime() - oldest.timestamp) / 1000)) : null,
    lastFailures: failures.map((job) => ({
      id: job.id ?? '',
      attemptsMade: job.attemptsMade,
      failedReason: job.failedReason ?? '',
      finishedAt: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
      to: typeof job.data?.to === 'string' ? maskEmail(job.data.to) : '***',
    })),
  };
}

/** Moves failed jobs back to waiting: all of them, or only `id`. Refuses expired codes and redacted jobs. */
export async function retryFailed(queue: EmailQueue, now: Date, id?: string): Promise<RetryReport> {
  const report: RetryReport = { retried: 0, skippedExpired: 0, skippedRedacted: 0 };
  const retry = async (job: Job<SendOtpJobData>) => {
    // Only a code email expires or is redacted; the worker itself skips an outdated account notice.
    const code = job.name === SEND_OTP_JOB;
    const to = job.data?.to;
    if (code && !(Date.parse(job.data?.expiresAt) > now.getTime())) report.skippedExpired += 1;
    else if (code && job.data?.sealedCode === REDACTED_CODE) report.skippedRedacted += 1;
    else if (typeof to === 'string' && isMasked(to)) report.skippedRedacted += 1;
    else {
      // A new delivery with the job's whole retry policy, as if just queued.
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      report.retried += 1;
    }
  };

  if (id !== undefined) {
    const job = await queue.getJob(id);
    if (!job || (await job.getState()) !== 'failed') throw new Error(`no failed job ${id}`);
    await retry(job);
    return report;
  }
  // Oldest first, so jobs failing meanwhile join the end. Retried jobs leave the failed set and skipped
  // ones stay: each page starts past the skipped.
  for (;;) {
    const skipped = report.skippedExpired + report.skippedRedacted;
    const jobs = await queue.getJobs(['failed'], skipped, skipped + PAGE - 1, true);
    if (jobs.length === 0) return report;
    for (const job of jobs) await retry(job);
  }
}
