import { flushCompileCache } from 'node:module';
import { loadOrExit, startOrExit, warnMisspelledVariables } from '@tessera/config';
import { RedisSettingsError } from '@tessera/redis';
import {
  closeGracefully,
  type OperationsServer,
  prettyInDevelopment,
  startOperationsServer,
  traceFields,
} from '@tessera/telemetry';
import pino from 'pino';
import { loadConfig, MailerConfigSchema, smtpCertificateUnchecked } from './config.ts';
import { createTransport } from './transport.ts';
import { createMailWorker } from './worker.ts';

/**
 * The mailer process: one BullMQ worker and its operations server (metrics, health). On SIGINT/SIGTERM
 * it stops taking jobs and finishes the active ones, for at most SHUTDOWN_TIMEOUT seconds.
 */
const config = loadOrExit(loadConfig);

const logger = pino({
  name: 'mailer',
  level: config.log.level,
  // ioredis attaches the failed command to its errors; a job's data in it holds an address.
  redact: ['err.command'],
  mixin: traceFields,
  ...prettyInDevelopment(config.env, import.meta.url),
});
warnMisspelledVariables(logger, MailerConfigSchema, process.env);
if (config.env === 'production' && smtpCertificateUnchecked(config))
  logger.warn(
    "SMTP_URL turns off the check of the SMTP server's certificate (?tls.rejectUnauthorized): whoever answers at its address reads every code. Trust a private CA with NODE_EXTRA_CA_CERTS instead (README, Operations: Email delivery)",
  );
const transport = createTransport(config);
let refused = false;
/**
 * Stops for what no retry mends, saying why. Started again (by the orchestrator) once it is fixed;
 * until then it says why on every start. The jobs in flight finish first, as on SIGTERM.
 */
function cannotGoOn(fields: object, message: string) {
  if (refused) return;
  refused = true;
  logger.fatal(fields, message);
  stop();
}
const mailWorker = createMailWorker({
  config,
  transport,
  logger,
  onRefused: (error) =>
    cannotGoOn(
      { reason: error.message },
      'Redis refuses the mailer a command or key it needs (its ACL): stopping (README, Operations: Least privilege)',
    ),
});
let operations: OperationsServer | undefined;

const stop = closeGracefully({
  timeoutMs: config.shutdownTimeout * 1000,
  log: logger,
  async close() {
    operations?.drain();
    await mailWorker.close();
    // Answering probes (not ready) and scrapes until the jobs are done.
    await operations?.close();
    transport.close();
    logger.info('closed');
  },
});

operations = await startOrExit(
  'mailer',
  'MAILER_METRICS_HOST, MAILER_METRICS_PORT: ',
  startOperationsServer({
    host: config.ops.host,
    port: config.ops.port,
    checks: {
      redis: mailWorker.ping,
      // Without SMTP_URL mail goes to the outbox folder, which needs no server.
      ...(transport.delivery === 'smtp' && { smtp: transport.verify }),
    },
  }),
);

// Refused by Redis while the server started: the drain began without it.
if (refused) operations.drain();

// Every module is loaded: Node's copy of their compile cache is freed, after it writes what the
// cache lacked. A no-op without NODE_COMPILE_CACHE.
flushCompileCache();

logger.info(
  {
    queue: 'email',
    concurrency: config.worker.concurrency,
    rateLimit: config.worker.rateLimit || 'none',
    delivery: config.smtp.url ? 'smtp' : config.smtp.outboxDir,
    operations: operations.url,
  },
  'mailer started',
);
// BullMQ waits for Redis before it sets up the worker's connection, and a set-up that failed is not
// made again: a start mends it.
const setUp = mailWorker.setUp().catch((err: unknown) => {
  cannotGoOn(
    { err },
    "BullMQ could not set up the worker's Redis connection (its version check failed): stopping",
  );
  return false;
});
// Not awaited: a Redis that is not there yet is the readiness check's to report.
void mailWorker
  .connected()
  .then(() => (refused ? undefined : mailWorker.checkRedis()))
  .catch((err: unknown) => {
    if (err instanceof RedisSettingsError) return cannotGoOn({}, `${err.message}: stopping`);
    logger.warn({ err }, "Redis's durability and clock not checked");
  })
  .then(async () => {
    if ((await setUp) && !refused) logger.info('mailer ready');
  });
