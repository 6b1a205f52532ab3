import { EMAIL_QUEUE } from '@tessera/contracts';
import { closeRedis, createRedis, type RedisClient, type RedisTarget, reportOutages } from '@tessera/redis';
import { bullmqTelemetry, observeQueueJobs } from '@tessera/telemetry';
import { Queue } from 'bullmq';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    mailQueue: Queue;
    /** The mail queue's own Redis connection. */
    mailQueueRedis: RedisClient;
  }
}

/**
 * The producer side of the `email` queue (BullMQ), on a connection of its own that fails fast; its job
 * counts at /metrics (`tessera_email_queue_jobs`).
 */
export default fp<{ redis: RedisTarget; prefix: string; readOnly?: boolean }>(
  async function mailQueuePlugin(app, { redis, prefix, readOnly = false }) {
    const connection = createRedis(redis, 'producer', () => {});
    reportOutages(connection, app.log, 'mail queue Redis');
    await connection.connect();
    // The job carries the request's trace context, so the mailer's spans join its trace.
    // `readOnly` (an operator's look): BullMQ would otherwise write the queue's meta key at once.
    const queue = new Queue(EMAIL_QUEUE, {
      connection,
      prefix,
      telemetry: bullmqTelemetry(),
      skipMetasUpdate: readOnly,
    });
    // Its connection's errors, told above.
    queue.on('error', (err) => app.log.debug({ err }, 'mail queue error'));
    // BullMQ reads the server's version first: a Redis user not allowed to (its ACL) stops the start
    // here, rather than fail every send.
    await queue.waitUntilReady();
    app.decorate('mailQueue', queue);
    app.decorate<RedisClient>('mailQueueRedis', connection);
    const stopObserving = observeQueueJobs(queue, connection);
    app.addHook('onClose', async () => {
      stopObserving();
      await queue.close();
      await closeRedis(connection);
    });
  },
  { name: 'mail-queue' },
);
