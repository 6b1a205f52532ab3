import os from 'node:os';
import path from 'node:path';
import { readConfig, requireInProduction, shared, variable } from '@tessera/config';
import { type Static, Type } from 'typebox';

const queue = Type.Object({
  redisUrl: shared.redisUrl,
  clusterNodes: shared.redisClusterNodes,
  prefix: shared.bullmqPrefix,
});

/** Every setting of the mailer: where it lives in the configuration and which variable sets it. */
export const MailerConfigSchema = Type.Object({
  env: shared.appEnv,
  log: Type.Object({ level: shared.logLevel }),
  shutdownTimeout: shared.shutdownTimeout,
  queue,
  smtp: Type.Object({
    url: Type.Optional(
      variable(
        'SMTP_URL',
        Type.String({
          pattern: '^smtps?://',
          description:
            '`smtp://user:pass@host:587` or `smtps://…:465`. Required in production; unset in development, mail goes to the outbox.',
        }),
      ),
    ),
    from: variable(
      'MAIL_FROM',
      Type.String({
        default: 'Tessera <no-reply@tessera.localhost>',
        description: 'Sender. Required in production.',
      }),
    ),
    outboxDir: variable(
      'MAIL_OUTBOX_DIR',
      Type.String({
        default: path.join(os.homedir(), '.cache', 'tessera', 'outbox'),
        description: 'Where development mail goes as `.eml` files when `SMTP_URL` is unset.',
      }),
    ),
  }),
  worker: Type.Object({
    concurrency: variable(
      'MAILER_CONCURRENCY',
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: 5,
        description: 'Jobs one mailer process sends at once.',
      }),
    ),
    rateLimit: variable(
      'MAILER_RATE_LIMIT',
      Type.Integer({
        minimum: 0,
        maximum: 100_000,
        default: 0,
        description:
          "Most emails per second, all mailer processes together (BullMQ's limiter); `0` = no limit.",
      }),
    ),
  }),
  ops: Type.Object({
    port: variable(
      'MAILER_METRICS_PORT',
      Type.Integer({
        minimum: 0,
        maximum: 65_535,
        default: 9464,
        description: 'Port of `/metrics`, `/health/live` and `/health/ready`; `0` picks a free one.',
      }),
    ),
    host: variable(
      'MAILER_METRICS_HOST',
      Type.String({ default: '0.0.0.0', description: 'Address of that port.' }),
    ),
  }),
});

export type MailerConfig = Static<typeof MailerConfigSchema>;

/** Reads, validates and freezes the mailer configuration; throws one line naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): MailerConfig {
  const config = readConfig(MailerConfigSchema, env);
  // Checked on the raw environment: MAIL_FROM has a default that production must not rely on.
  requireInProduction(env, [['SMTP_URL'], ['MAIL_FROM']]);
  return config;
}

export type QueueConfig = Static<typeof queue>;

/** Just where the queue is, for the operator commands: they need no SMTP settings, even in production. */
export function loadQueueConfig(env: NodeJS.ProcessEnv = process.env): QueueConfig {
  return readConfig(queue, env);
}
