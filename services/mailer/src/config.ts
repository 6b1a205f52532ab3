import os from 'node:os';
import path from 'node:path';
import { AppEnv, LogLevel, readEnv, requireInProduction } from '@tessera/config';
import { type Static, Type } from 'typebox';

const ConfigSchema = Type.Object({
  APP_ENV: AppEnv,
  LOG_LEVEL: LogLevel,
  REDIS_URL: Type.String({ default: 'redis://127.0.0.1:6379' }),
  BULLMQ_PREFIX: Type.String({ default: 'bull' }),
  /** `smtp://user:pass@host:587` or `smtps://…:465`. Unset in development: mail goes to MAIL_OUTBOX_DIR. */
  SMTP_URL: Type.Optional(Type.String({ pattern: '^smtps?://' })),
  MAIL_FROM: Type.String({ default: 'Tessera <no-reply@tessera.localhost>' }),
  MAIL_OUTBOX_DIR: Type.String({ default: path.join(os.homedir(), '.cache', 'tessera', 'outbox') }),
  /** Jobs one mailer process works on at once. */
  MAILER_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 100, default: 5 }),
  /** Most emails sent per second by all mailer processes together (BullMQ's limiter is global); 0: no limit. */
  MAILER_RATE_LIMIT: Type.Integer({ minimum: 0, maximum: 100_000, default: 0 }),
  /** Seconds SIGTERM waits for active jobs to finish before the process gives up and exits 1. */
  MAILER_SHUTDOWN_TIMEOUT: Type.Integer({ minimum: 1, maximum: 3600, default: 30 }),
  /** Port of `/metrics` and `/health/*`; 0 picks a free one. */
  MAILER_METRICS_PORT: Type.Integer({ minimum: 0, maximum: 65_535, default: 9464 }),
  MAILER_METRICS_HOST: Type.String({ default: '0.0.0.0' }),
});

export type MailerConfig = Readonly<Static<typeof ConfigSchema>>;

/** Reads, validates and freezes the mailer configuration; throws one line naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): MailerConfig {
  const config = readEnv(ConfigSchema, env);
  // Checked on the raw environment: MAIL_FROM has a default that production must not rely on.
  requireInProduction(env, [['SMTP_URL'], ['MAIL_FROM']]);
  return config;
}

const QueueConfigSchema = Type.Pick(ConfigSchema, ['REDIS_URL', 'BULLMQ_PREFIX']);
export type QueueConfig = Readonly<Static<typeof QueueConfigSchema>>;

/** Just where the queue is, for the operator commands: they need no SMTP settings, even in production. */
export function loadQueueConfig(env: NodeJS.ProcessEnv = process.env): QueueConfig {
  return readEnv(QueueConfigSchema, env);
}
