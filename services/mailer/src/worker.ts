import { EMAIL_QUEUE, REDACTED_CODE, SEND_OTP_JOB, SendOtpJobData } from '@tessera/contracts';
import { type Job, UnrecoverableError, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import type { MailerConfig } from './config.ts';
import { type SendOtpResult, sendOtp } from './send-otp.job.ts';
import type { MailTransport } from './transport.ts';

export interface MailWorkerOptions {
  config: MailerConfig;
  transport: MailTransport;
  logger: Logger;
  now?: () => Date;
}

/** `a***@example.com`: enough to tell jobs apart in logs, not enough to harvest addresses. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return at < 1 ? '***' : `${email[0]}***${email.slice(at)}`;
}

/** Whether a failed attempt was the job's last, given the attempts counted so far (this one included). */
const isLastAttempt = (job: Job, error: unknown, attemptsCounted: number) =>
  error instanceof UnrecoverableError || attemptsCounted >= (job.opts.attempts ?? 1);

/** The BullMQ worker of the `email` queue; run as many mailer processes as the queue needs. */
export function createMailWorker({ config, transport, logger, now = () => new Date() }: MailWorkerOptions) {
  // Workers block on Redis and must retry forever (BullMQ's production guide).
  const connection = new Redis(config.REDIS_URL, { maxRetriesPerRequest: null });

  const worker = new Worker<SendOtpJobData, SendOtpResult>(
    EMAIL_QUEUE,
    async (job) => {
      if (job.name !== SEND_OTP_JOB) throw new UnrecoverableError(`Unknown job ${job.name}`);
      try {
        if (!Value.Check(SendOtpJobData, job.data))
          throw new UnrecoverableError('Malformed send-otp job data');
        const result = await sendOtp(job.data, transport, now());
        logger.info({ jobId: job.id, to: maskEmail(job.data.to), ...result }, 'send-otp done');
        return result;
      } catch (error) {
        // The last attempt failed: the job is kept for inspection, so it must not keep a usable code.
        // BullMQ counts this attempt only after the processor returns.
        if (isLastAttempt(job, error, job.attemptsMade + 1))
          await job.updateData({ ...job.data, code: REDACTED_CODE });
        throw error;
      }
    },
    { connection, prefix: config.BULLMQ_PREFIX, concurrency: config.MAILER_CONCURRENCY },
  );

  worker.on('failed', (job: Job<SendOtpJobData> | undefined, error: Error) => {
    if (!job) return;
    const final = isLastAttempt(job, error, job.attemptsMade);
    logger.warn(
      { jobId: job.id, attempt: job.attemptsMade, final, reason: error.message },
      'send-otp failed',
    );
  });
  worker.on('error', (err) => logger.error({ err }, 'mail worker error'));

  return {
    worker,
    async close() {
      await worker.close();
      if (connection.status === 'ready') await connection.quit();
      else connection.disconnect();
    },
  };
}
