import { SpanStatusCode, trace } from '@opentelemetry/api';
import {
  DELETION_CANCELLED_JOB,
  DELETION_SCHEDULED_JOB,
  EMAIL_JOB_DATA,
  EMAIL_JOB_OPTIONS,
  EMAIL_QUEUE,
  type EmailJobName,
  type EmailJobs,
  REDACTED_CODE,
  SEND_OTP_JOB,
} from '@tessera/contracts';
import {
  closeRedis,
  createRedis,
  isConnectionError,
  isSocketTimeout,
  type RedisClient,
  type RedisTarget,
  refuseClusterNode,
  reportOutages,
  warnIfClockDiffers,
  warnIfNotDurable,
} from '@tessera/redis';
import { bullmqTelemetry, observeQueueJobs } from '@tessera/telemetry';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { senderName } from './compose.ts';
import type { MailerConfig } from './config.ts';
import { sendDeletionCancelled, sendDeletionScheduled } from './deletion-email.job.ts';
import type { EmailResult, SendContext } from './deliver.ts';
import { createDeliveriesStore } from './deliveries.store.ts';
import { isMasked, maskEmail } from './mask.ts';
import { emails } from './metrics.ts';
import {
  BACKOFF,
  type Backoff,
  backoffDelay,
  deliveryDeadline,
  ExpiredError,
  NOTICE_BACKOFF,
} from './retry-policy.ts';
import { sendOtp } from './send-otp.job.ts';
import type { MailTransport } from './transport.ts';

export interface MailWorkerOptions {
  config: MailerConfig;
  transport: MailTransport;
  logger: Logger;
  now?: () => Date;
  /** A code's retries. */
  backoff?: Backoff;
  /** An account notice's retries. */
  noticeBackoff?: Backoff;
  /**
   * Redis refused the worker a command for want of permission (an ACL): nothing retried helps, and
   * BullMQ's loop would retry at once, without end and without letting anything else run.
   */
  onRefused?: (error: Error) => void;
}

// Redis's answer to a command or key its ACL does not allow the user.
const isRefused = (error: Error) => error.message.startsWith('NOPERM');

type EmailJobData = EmailJobs[EmailJobName];
type Sender<N extends EmailJobName> = (
  data: EmailJobs[N],
  transport: MailTransport,
  context: SendContext,
) => Promise<EmailResult>;

/** What sends each job of the `email` queue, by job name. */
const SENDERS: { [N in EmailJobName]: Sender<N> } = {
  [SEND_OTP_JOB]: sendOtp,
  [DELETION_SCHEDULED_JOB]: sendDeletionScheduled,
  [DELETION_CANCELLED_JOB]: sendDeletionCancelled,
};

const isEmailJob = (name: string): name is EmailJobName => Object.hasOwn(SENDERS, name);

/**
 * The contract's schema of each job's data (JSON Schema), compiled once by Ajv, which the
 * configuration's check has loaded already: TypeBox's own compiler would load ~300 modules more,
 * ~13 MB of the mailer's memory.
 */
const ajv = addFormats.default(new Ajv(), ['date-time']);
const VALIDATORS = {
  [SEND_OTP_JOB]: ajv.compile(EMAIL_JOB_DATA[SEND_OTP_JOB]),
  [DELETION_SCHEDULED_JOB]: ajv.compile(EMAIL_JOB_DATA[DELETION_SCHEDULED_JOB]),
  [DELETION_CANCELLED_JOB]: ajv.compile(EMAIL_JOB_DATA[DELETION_CANCELLED_JOB]),
};

/** Checks a job's data against the contract. */
function checked<N extends EmailJobName>(name: N, data: unknown): EmailJobs[N] {
  if (!VALIDATORS[name](data)) throw new UnrecoverableError(`Malformed ${name} job data`);
  return data as EmailJobs[N];
}

const send = <N extends EmailJobName>(
  name: N,
  data: EmailJobs[N],
  transport: MailTransport,
  context: SendContext,
) => SENDERS[name](data, transport, context);

/**
 * A failed job's data without what it no longer needs: the sealed code of a code email and, as it can
 * no longer be sent, the full address of any email. Undefined when there is nothing left to redact.
 */
function redacted(job: Job<EmailJobData>): EmailJobData | undefined {
  const data = job.data as EmailJobData | null | undefined;
  if (typeof data !== 'object' || data === null) return undefined;
  const { to, sealedCode } = data as { to?: unknown; sealedCode?: unknown };
  const holdsCode =
    job.name === SEND_OTP_JOB && typeof sealedCode === 'string' && sealedCode !== REDACTED_CODE;
  const holdsAddress = typeof to === 'string' && !isMasked(to);
  if (!holdsCode && !holdsAddress) return undefined;
  return {
    ...data,
    ...(holdsAddress && { to: maskEmail(to) }),
    ...(holdsCode && { sealedCode: REDACTED_CODE }),
  } as EmailJobData;
}

/**
 * Whether a failed attempt was the job's last: a permanent failure (expiry included), the attempts
 * backstop reached, or a stalled job failed by BullMQ.
 */
const isFinal = (job: Job, error: Error) =>
  error instanceof UnrecoverableError ||
  error.name === 'UnrecoverableError' ||
  job.attemptsMade >= (job.opts.attempts ?? 1);

/**
 * The processor, marking a failed attempt an error of its job's span (the active span while it runs):
 * BullMQ only adds a `job failed` event to it.
 */
function failingSpan<R>(processor: (job: Job<EmailJobData>) => Promise<R>) {
  return async (job: Job<EmailJobData>): Promise<R> => {
    try {
      return await processor(job);
    } catch (error) {
      trace.getActiveSpan()?.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    }
  };
}

// A command of the worker's connection (a job's fetch or completion, an acceptance record, a lock's
// extension) unanswered this long fails; after two such with nothing heard between, the connection is
// replaced (@tessera/redis). Without it, a connection lost on the way without a word (a NAT or
// firewall that forgot it) held every job until the kernel gave up on it, ~15 minutes.
const WORKER_COMMAND_TIMEOUT_MS = 10_000;

// How long BullMQ's blocking connection waits for a job when the queue is empty (BullMQ's default),
// seconds; for a delayed job it waits at most 10 s.
const DRAIN_DELAY_S = 5;
// BullMQ's blocking connection, silent this long with a command unanswered, is dropped and made
// again (ioredis's `socketTimeout`), its commands sent again on the new one: longer than its longest
// BZPOPMIN (DRAIN_DELAY_S, or 10 s), which BullMQ's own watchdog ends a second after its time. That
// watchdog only runs once the connection is set up: a connection lost in its set-up (the handshake,
// ioredis's ready check, BullMQ's version check, all without a timeout of their own) held the worker
// for good, or until the kernel gave up on it, and no job was taken.
const BLOCKING_SILENCE_MS = 2 * WORKER_COMMAND_TIMEOUT_MS;

/**
 * The worker's connection. On one Redis server its commands are auto-pipelined: those issued in the
 * same turn of the event loop (job completions, acceptance records, fetches) go out in one write and
 * come back in one read instead of a round trip each, and each must be answered within
 * WORKER_COMMAND_TIMEOUT_MS. BullMQ's blocking connection, a duplicate of this one, has neither: its
 * BZPOPMIN would hold back whatever shares its pipeline, and blocks for up to 10 s (BullMQ itself
 * connects it again when it overstays); it is made again when silent for BLOCKING_SILENCE_MS instead.
 * A cluster client keeps the role's settings.
 */
function workerConnection(target: RedisTarget, logger: Logger): RedisClient {
  if (target.clusterNodes) return createRedis(target, 'worker', () => {});
  const connection = createRedis(target, 'worker', () => {}, {
    enableAutoPipelining: true,
    commandTimeout: WORKER_COMMAND_TIMEOUT_MS,
  }) as Redis;
  const duplicate = connection.duplicate.bind(connection);
  connection.duplicate = (override) => {
    const blocking = duplicate({
      ...override,
      enableAutoPipelining: false,
      commandTimeout: undefined,
      socketTimeout: BLOCKING_SILENCE_MS,
    });
    blocking.on('error', (err: Error) => {
      if (isSocketTimeout(err))
        logger.warn(
          `BullMQ's blocking Redis connection answered nothing for ${BLOCKING_SILENCE_MS / 1000} s: connecting again`,
        );
    });
    return blocking;
  };
  return connection;
}

/**
 * The BullMQ worker of the `email` queue; run as many mailer processes as the queue needs. A job is
 * retried with capped exponential backoff until its deadline (`deliveryDeadline`), sent at most once
 * (SMTP's acceptance is recorded before the job completes), and a job that ends undelivered keeps no code.
 */
export function createMailWorker({
  config,
  transport,
  logger,
  now = () => new Date(),
  backoff = BACKOFF,
  noticeBackoff = NOTICE_BACKOFF,
  onRefused = () => {},
}: MailWorkerOptions) {
  const backoffOf = (name: string | undefined) => (name === SEND_OTP_JOB ? backoff : noticeBackoff);
  const redisTarget = { url: config.queue.redisUrl, clusterNodes: config.queue.clusterNodes };
  const connection = workerConnection(redisTarget, logger);
  reportOutages(connection, logger, 'Redis');
  const deliveries = createDeliveriesStore(connection, config.queue.prefix);
  const product = senderName(config.smtp.from);

  const worker = new Worker<EmailJobData, EmailResult>(
    EMAIL_QUEUE,
    failingSpan(async (job) => {
      const { name } = job;
      const jobId = job.id ?? '';
      if (!isEmailJob(name)) throw new UnrecoverableError(`Unknown job ${name}`);
      const data = checked(name, job.data);
      // Both asked at once (one round trip). Checked before every attempt: an email retried through
      // an SMTP outage that a newer one outdated would arrive last and mislead (a code that no longer
      // works; an account notice after the account's next transition, a cancellation or a new request).
      const [delivered, replaced] = await Promise.all([
        deliveries.wasDelivered(jobId),
        deliveries.wasReplaced(jobId, data),
      ]);
      if (delivered) {
        logger.info({ jobId, to: maskEmail(data.to) }, `${name} already accepted by SMTP, not sent again`);
        return { skipped: 'delivered' };
      }
      if (replaced) {
        emails.add(1, { outcome: 'replaced' });
        logger.info({ jobId, to: maskEmail(data.to) }, `${name} replaced by a newer one, not sent`);
        return { skipped: 'replaced' };
      }
      const deadline = deliveryDeadline(job);
      if (now().getTime() >= deadline) throw new ExpiredError('Expired before it could be sent');

      let result: EmailResult;
      try {
        result = await send(name, data, transport, {
          messageKey: `${jobId}:${job.timestamp}`,
          now: now(),
          keys: config.mailJobKeys,
          product,
          accountUrl: config.accountUrl,
        });
      } catch (error) {
        // BullMQ would retry after this delay: past the deadline, the email is no longer worth it.
        const retryAt = now().getTime() + backoffDelay(job.attemptsMade + 1, backoffOf(name));
        if (!(error instanceof UnrecoverableError) && retryAt >= deadline)
          throw new ExpiredError(`Expired before it could be sent (last error: ${(error as Error).message})`);
        throw error;
      }
      if ('sent' in result) await deliveries.recordDelivered(jobId, deadline, now().getTime());
      emails.add(1, { outcome: 'sent' in result ? 'sent' : 'expired' });
      logger.info({ jobId, to: maskEmail(data.to), ...result }, `${name} done`);
      return result;
    }),
    {
      connection,
      prefix: config.queue.prefix,
      concurrency: config.worker.concurrency,
      drainDelay: DRAIN_DELAY_S,
      // BullMQ keeps the limiter in Redis: the maximum holds for all mailer processes together.
      ...(config.worker.rateLimit > 0 && { limiter: { max: config.worker.rateLimit, duration: 1000 } }),
      // Renewed every half of it while a job runs, however slow the SMTP server.
      lockDuration: config.worker.lockDuration,
      stalledInterval: config.worker.stalledInterval,
      // A job a crashed mailer held is queued again however often that happens (the next mailer killed
      // too, a crash loop): like a failed send, it ends at its deadline. BullMQ's default fails it for
      // good at its second stall, and its email is never sent. Each stall is counted and logged.
      maxStalledCount: EMAIL_JOB_OPTIONS.attempts,
      settings: {
        backoffStrategy: (retry: number, _type?: string, _error?: Error, job?: { name: string }) =>
          backoffDelay(retry, backoffOf(job?.name)),
      },
      // A job's span continues the trace of the request that queued it.
      telemetry: bullmqTelemetry(),
    },
  );

  // Seen by whichever mailer's check found the job's lock run out: the one that held it stopped.
  worker.on('stalled', (jobId: string) => {
    emails.add(1, { outcome: 'stalled' });
    logger.warn(
      { jobId },
      'email job taken back from a mailer that stopped (killed, or blocked past MAILER_LOCK_DURATION_MS)',
    );
  });
  worker.on('failed', (job: Job<EmailJobData> | undefined, error: Error) => {
    if (!job) return;
    const final = isFinal(job, error);
    emails.add(1, { outcome: error instanceof ExpiredError ? 'expired' : final ? 'failed' : 'retried' });
    logger.warn(
      { jobId: job.id, attempt: job.attemptsMade, final, reason: error.message },
      `${job.name} failed`,
    );
    // Kept for inspection, the job must not keep a usable code, nor (as it can no longer be sent) the
    // full address; this also covers a job BullMQ fails after it stalled too often, which the
    // processor never sees.
    const data = final ? redacted(job) : undefined;
    if (data)
      job.updateData(data).catch((err: unknown) => {
        logger.error({ err, jobId: job.id }, 'could not redact a failed job');
      });
  });
  // An error of its connections is the outage's, told once (reportOutages), even when it comes before
  // the connection knows it is lost (a reset). On a node of a Redis Cluster given alone, its errors
  // (MOVED, CLUSTERDOWN) are checkRedis's refusal's, told once.
  let onClusterNode = false;
  worker.on('error', (err) => {
    if (isRefused(err)) return onRefused(err);
    if (onClusterNode || isConnectionError(err) || connection.status !== 'ready')
      logger.debug({ err }, 'mail worker error');
    else logger.error({ err }, 'mail worker error');
  });

  // For readiness and the queue gauge: a connection that fails at once while Redis is away, instead of
  // queueing commands as the worker's does.
  const probe = createRedis(redisTarget, 'producer', () => {}, { lazyConnect: false });
  const queue = new Queue(EMAIL_QUEUE, { connection: probe, prefix: config.queue.prefix });
  // The worker already reports Redis errors.
  queue.on('error', (err) => logger.debug({ err }, 'queue sampling error'));
  const stopObserving = observeQueueJobs(queue, probe);
  let closing = false;
  // BullMQ sets the worker's connection up once Redis answers, and never again if that fails.
  let isSetUp = false;
  const settingUp = worker.waitUntilReady().then(
    () => {
      isSetUp = true;
    },
    (error: Error) => {
      if (closing) return;
      if (!isRefused(error)) throw error;
      onRefused(error);
    },
  );
  // Handled by `setUp`'s caller, once the process has started: not an unhandled rejection before.
  settingUp.catch(() => {});

  return {
    worker,
    /** Resolves when Redis answers PING and BullMQ has set up the worker's connection. */
    ping: async (): Promise<void> => {
      await probe.ping();
      if (!isSetUp) throw new Error("BullMQ has not set up the worker's connection");
    },
    /**
     * Whether BullMQ set up the worker's connection, once it has or the mailer closes; rejects when
     * its set-up failed (its version check unanswered for WORKER_COMMAND_TIMEOUT_MS: a connection lost
     * on the way), after which BullMQ takes no job for good. A refusal (its ACL) is `onRefused`'s.
     */
    setUp: (): Promise<boolean> => settingUp.then(() => isSetUp),
    /** Resolves once Redis answers (the readiness check reports it meanwhile). */
    async connected(): Promise<void> {
      if (probe.status !== 'ready') await new Promise((resolve) => probe.once('ready', resolve));
    },
    /**
     * Once Redis answers: a RedisSettingsError when REDIS_URL is a node of a Redis Cluster; a warning
     * when it is set up to lose queued emails, and one when this host's clock is not Redis's (README,
     * Operations).
     */
    async checkRedis(): Promise<void> {
      await this.connected();
      await refuseClusterNode(probe).catch((error: unknown) => {
        onClusterNode = true;
        throw error;
      });
      await warnIfNotDurable(probe, logger);
      await warnIfClockDiffers(probe, logger, () => now().getTime());
    },
    async close() {
      closing = true;
      // With Redis away, no job could record its end, and BullMQ would wait for Redis for good: the
      // worker stops at once, and its active jobs are taken up again (stalled) once Redis is back.
      await worker.close(probe.status !== 'ready');
      stopObserving();
      await queue.close();
      await Promise.all([closeRedis(connection), closeRedis(probe)]);
    },
  };
}
