import {
  EMAIL_QUEUE,
  SEND_OTP_JOB,
  SEND_OTP_JOB_OPTIONS,
  type SendOtpJobData,
  sendOtpJobId,
} from '@tessera/contracts';
import { bullmqTelemetry } from '@tessera/telemetry';
import { Queue } from 'bullmq';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';

/** Hands a one-time-code email to the mailer; resolves once the job is stored in Redis. */
export type EnqueueOtpEmail = (codeId: string, data: SendOtpJobData) => Promise<void>;

declare module 'fastify' {
  interface FastifyInstance {
    enqueueOtpEmail: EnqueueOtpEmail;
  }
}

/** The producer side of the `email` queue (BullMQ). */
export default fp(
  async function mailQueuePlugin(app) {
    // A producer fails fast instead of queueing commands while Redis is away (BullMQ's production guide).
    const connection = new Redis(app.config.REDIS_URL, { enableOfflineQueue: false, lazyConnect: true });
    connection.on('error', (err) => app.log.warn({ err }, 'mail queue Redis connection error'));
    await connection.connect();
    const queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
      connection,
      prefix: app.config.BULLMQ_PREFIX,
      // The job carries the request's trace context, so the mailer's spans join its trace.
      telemetry: bullmqTelemetry(),
    });
    queue.on('error', (err) => app.log.warn({ err }, 'mail queue error'));

    app.decorate('enqueueOtpEmail', async (codeId: string, data: SendOtpJobData) => {
      await queue.add(SEND_OTP_JOB, data, {
        ...SEND_OTP_JOB_OPTIONS,
        attempts: app.config.MAIL_RETRY_ATTEMPTS,
        backoff: { type: 'exponential', delay: app.config.MAIL_RETRY_BACKOFF_MS },
        jobId: sendOtpJobId(codeId),
      });
    });
    app.addHook('onClose', async () => {
      await queue.close();
      if (connection.status === 'ready') await connection.quit();
      else connection.disconnect();
    });
  },
  { name: 'mail-queue', dependencies: ['config'] },
);
