import { EMAIL_QUEUE, REDACTED_CODE, SEND_OTP_JOB, SendOtpJobData } from '@tessera/contracts';
import { bullmqTelemetry } from '@tessera/telemetry';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import type { MailerConfig } from './config.ts';
import { maskEmail } from './mask.ts';
import { emails, observeQueueJobs } from './metrics.ts';
import { type SendOtpResult, sendOtp } from './send-otp.job.ts';
import type { MailTransport } from './transport.ts';

export interface MailWorkerOptions {
  config: MailerConfig;
  transport: MailTransport;
  logger: Logger;
  now?: () => Date;
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
        emails.add(1, { outcome: 'sent' in result ? 'sent' : 'skipped_expired' });
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
    {
      connection,
      prefix: config.BULLMQ_PREFIX,
      concurrency: config.MAILER_CONCURRENCY,
      // BullMQ keeps the limiter in Redis: the maximum holds for all mailer processes together.
      ...(config.MAILER_RATE_LIMIT > 0 && { limiter: { max: config.MAILER_RATE_LIMIT, duration: 1000 } }),
      // A job's span continues the trace of the request that queued it.
      telemetry: bullmqTelemetry(),
    },
  );

  worker.on('failed', (job: Job<SendOtpJobData> | undefined, error: Error) => {
    if (!job) return;
    const final = isLastAttempt(job, error, job.attemptsMade);
    emails.add(1, { outcome: final ? 'failed' : 'retried' });
    logger.warn(
      { jobId: job.id, attempt: job.attemptsMade, final, reason: error.message },
      'send-otp failed',
    );
  });
  worker.on('error', (err) => logger.error({ err }, 'mail worker error'));

  // For readiness and the queue gauge: a connection that fails at once while Redis is away, instead of
  // queueing commands as the worker's does.
  const probe = new Redis(config.REDIS_URL, { enableOfflineQueue: false });
  const queue = new Queue(EMAIL_QUEUE, { connection: probe, prefix: config.BULLMQ_PREFIX });
  // The worker already reports Redis errors.
  queue.on('error', (err) => logger.debug({ err }, 'queue sampling error'));
  const stopObserving = observeQueueJobs(queue);

  return {
    worker,
    /** Resolves when Redis answers PING. */
    ping: async (): Promise<void> => {
      await probe.ping();
    },
    async close() {
      await worker.close();
      stopObserving();
      await queue.close();
      for (const client of [connection, probe]) {
        if (client.status === 'ready') await client.quit();
        else client.disconnect();
      }
    },
  };
}
