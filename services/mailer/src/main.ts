import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { ConfigError, loadConfig } from './config.ts';
import { createTransport } from './transport.ts';
import { createMailWorker } from './worker.ts';

/** The mailer process: one BullMQ worker, closed gracefully on SIGINT/SIGTERM. */
let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(error.message);
  process.exit(1);
}

const logger = pino({
  name: 'mailer',
  level: config.LOG_LEVEL,
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
