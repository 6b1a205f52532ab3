import {
  DELETION_CANCELLED_JOB,
  DELETION_SCHEDULED_JOB,
  EMAIL_JOB_DATA,
  EMAIL_QUEUE,
  type EmailJobName,
  type EmailJobs,
  REDACTED_CODE,
  SEND_OTP_JOB,
} from '@tessera/contracts';
import { closeRedis, createRedis } from '@tessera/redis';
import { bullmqTelemetry } from '@tessera/telemetry';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import type { MailerConfig } from './config.ts';
import { sendDeletionCancelled, sendDeletionScheduled } from './deletion-email.job.ts';
import type { EmailResult } from './deliver.ts';
import { maskEmail } from './mask.ts';
import { emails, observeQueueJobs } from './metrics.ts';
import { sendOtp } from './send-otp.job.ts';
import type { MailTransport } from './transport.ts';

export interface MailWorkerOptions {
  config: MailerConfig;
  transport: MailTransport;
  logger: Logger;
  now?: () => Date;
}

type EmailJobData = EmailJobs[EmailJobName];
type Sender<N extends EmailJobName> = (
  data: EmailJobs[N],
  transport: MailTransport,
  now: Date,
) => Promise<EmailResult>;

/** What sends each job of the `email` queue, by job name. */
const SENDERS: { [N in EmailJobName]: Sender<N> } = {
  [SEND_OTP_JOB]: sendOtp,
  [DELETION_SCHEDULED_JOB]: sendDeletionScheduled,
  [DELETION_CANCELLED_JOB]: sendDeletionCancelled,
};

const isEmailJob = (name: string): name is EmailJobName => Object.hasOwn(SENDERS, name);

/** Checks a job's data against the contract, then sends it with the sender of its name. */
function send<N extends EmailJobName>(name: N, data: unknown, transport: MailTransport, now: Date) {
  if (!Value.Check(EMAIL_JOB_DATA[name], data)) throw new UnrecoverableError(`Malformed ${name} job data`);
  return SENDERS[name](data as EmailJobs[N], transport, now);
}

/** Whether a failed attempt was the job's last, given the attempts counted so far (this one included). */
const isLastAttempt = (job: Job, error: unknown, attemptsCounted: number) =>
  error instanceof UnrecoverableError || attemptsCounted >= (job.opts.attempts ?? 1);

/** The BullMQ worker of the `email` queue; run as many mailer processes as the queue needs. */
export function createMailWorker({ config, transport, logger, now = () => new Date() }: MailWorkerOptions) {
  const redisTarget = { url: config.queue.redisUrl, clusterNodes: config.queue.clusterNodes };
  // The worker itself reports connection errors ('error' below).
  const connection = createRedis(redisTarget, 'worker', () => {});

  const worker = new Worker<EmailJobData, EmailResult>(
    EMAIL_QUEUE,
    async (job) => {
      const { name } = job;
      if (!isEmailJob(name)) throw new UnrecoverableError(`Unknown job ${name}`);
      try {
        const result = await send(name, job.data, transport, now());
        emails.add(1, { outcome: 'sent' in result ? 'sent' : 'skipped_expired' });
        logger.info({ jobId: job.id, to: maskEmail(job.data.to), ...result }, `${name} done`);
        return result;
      } catch (error) {
        // The last attempt failed: the job is kept for inspection, so it must not keep a usable code.
        // BullMQ counts this attempt only after the processor returns.
        if (name === SEND_OTP_JOB && isLastAttempt(job, error, job.attemptsMade + 1))
          await job.updateData({ ...job.data, code: REDACTED_CODE });
        throw error;
      }
    },
    {
      connection,
      prefix: config.queue.prefix,
      concurrency: config.worker.concurrency,
      // BullMQ keeps the limiter in Redis: the maximum holds for all mailer processes together.
      ...(config.worker.rateLimit > 0 && { limiter: { max: config.worker.rateLimit, duration: 1000 } }),
      // A job's span continues the trace of the request that queued it.
      telemetry: bullmqTelemetry(),
    },
  );

  worker.on('failed', (job: Job<EmailJobData> | undefined, error: Error) => {
    if (!job) return;
    const final = isLastAttempt(job, error, job.attemptsMade);
    emails.add(1, { outcome: final ? 'failed' : 'retried' });
    logger.warn(
      { jobId: job.id, attempt: job.attemptsMade, final, reason: error.message },
      `${job.name} failed`,
    );
  });
  worker.on('error', (err) => logger.error({ err }, 'mail worker error'));

  // For readiness and the queue gauge: a connection that fails at once while Redis is away, instead of
  // queueing commands as the worker's does.
  const probe = createRedis(redisTarget, 'producer', () => {}, { lazyConnect: false });
  const queue = new Queue(EMAIL_QUEUE, { connection: probe, prefix: config.queue.prefix });
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
      await Promise.all([closeRedis(connection), closeRedis(probe)]);
    },
  };
}
