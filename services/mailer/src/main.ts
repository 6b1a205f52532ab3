import { loadOrExit } from '@tessera/config';
import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { loadConfig } from './config.ts';
import { createTransport } from './transport.ts';
import { createMailWorker } from './worker.ts';

/** The mailer process: one BullMQ worker, closed gracefully on SIGINT/SIGTERM. */
const config = loadOrExit(loadConfig);

const logger = pino({
  name: 'mailer',
  level: config.LOG_LEVEL,
  // ioredis attaches the failed command to its errors; a job's data in it holds a code.
  redact: ['err.command'],
  ...(config.APP_ENV === 'development' ? { transport: { target: 'pino-pretty' } } : {}),
});
const transport = createTransport(config);
const mailWorker = createMailWorker({ config, transport, logger });

closeWithGrace({ delay: 30_000 }, async ({ signal, err }) => {
  if (err) logger.error({ err }, 'closing after an error');
  else logger.info({ signal }, 'closing: finishing active jobs');
  await mailWorker.close();
  transport.close();
});

logger.info(
  {
    queue: 'email',
    concurrency: config.MAILER_CONCURRENCY,
    delivery: config.SMTP_URL ? 'smtp' : config.MAIL_OUTBOX_DIR,
  },
  'mailer ready',
);
