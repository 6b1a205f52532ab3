import { loadOrExit } from '@tessera/config';
import { shutdownTelemetry, traceFields } from '@tessera/telemetry';
import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { loadConfig } from './config.ts';
import { type OperationsServer, startOperationsServer } from './operations-server.ts';
import { createTransport } from './transport.ts';
import { createMailWorker } from './worker.ts';

/**
 * The mailer process: one BullMQ worker and its operations server (metrics, health). On SIGINT/SIGTERM
 * it stops taking jobs and finishes the active ones, for at most MAILER_SHUTDOWN_TIMEOUT seconds.
 */
const config = loadOrExit(loadConfig);

const logger = pino({
  name: 'mailer',
  level: config.LOG_LEVEL,
  // ioredis attaches the failed command to its errors; a job's data in it holds a code.
  redact: ['err.command'],
  mixin: traceFields,
  ...(config.APP_ENV === 'development' ? { transport: { target: 'pino-pretty' } } : {}),
});
const transport = createTransport(config);
const mailWorker = createMailWorker({ config, transport, logger });
let operations: OperationsServer | undefined;

closeWithGrace({ delay: config.MAILER_SHUTDOWN_TIMEOUT * 1000, logger }, async ({ signal, err }) => {
  if (err) logger.error({ err }, 'closing after an error');
  else logger.info({ signal }, 'closing: finishing active jobs');
  await mailWorker.close();
  // Answering probes and scrapes until the jobs are done.
  await operations?.close();
  transport.close();
  await shutdownTelemetry();
  logger.info('closed');
});

operations = await startOperationsServer({
  host: config.MAILER_METRICS_HOST,
  port: config.MAILER_METRICS_PORT,
  checks: {
    redis: mailWorker.ping,
    // Without SMTP_URL mail goes to the outbox folder, which needs no server.
    ...(transport.delivery === 'smtp' && { smtp: transport.verify }),
  },
});

logger.info(
  {
    queue: 'email',
    concurrency: config.MAILER_CONCURRENCY,
    rateLimit: config.MAILER_RATE_LIMIT || 'none',
    delivery: config.SMTP_URL ? 'smtp' : config.MAIL_OUTBOX_DIR,
    operations: operations.url,
  },
  'mailer ready',
);
