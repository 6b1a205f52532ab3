import os from 'node:os';
import path from 'node:path';
import envSchema from 'env-schema';
import { type Static, Type } from 'typebox';

const ConfigSchema = Type.Object({
  APP_ENV: Type.Union([Type.Literal('development'), Type.Literal('test'), Type.Literal('production')], {
    default: 'development',
  }),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  REDIS_URL: Type.String({ default: 'redis://127.0.0.1:6379' }),
  BULLMQ_PREFIX: Type.String({ default: 'bull' }),
  /** `smtp://user:pass@host:587` or `smtps://…:465`. Unset in development: mail goes to MAIL_OUTBOX_DIR. */
  SMTP_URL: Type.Optional(Type.String({ pattern: '^smtps?://' })),
  MAIL_FROM: Type.String({ default: 'Tessera <no-reply@tessera.localhost>' }),
  MAIL_OUTBOX_DIR: Type.String({ default: path.join(os.homedir(), '.cache', 'tessera', 'outbox') }),
  /** Jobs one mailer process works on at once. */
  MAILER_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 100, default: 5 }),
});

export type MailerConfig = Readonly<Static<typeof ConfigSchema>>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Reads, validates and freezes the mailer configuration; throws one line naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): MailerConfig {
  let parsed: MailerConfig;
  try {
    parsed = envSchema<MailerConfig>({ schema: ConfigSchema, data: env, env: false, dotenv: false });
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${(error as Error).message.replaceAll('env/', '')}`);
  }
  if (parsed.APP_ENV === 'production') {
    for (const name of ['SMTP_URL', 'MAIL_FROM'] as const) {
      if (!env[name])
        throw new ConfigError(`Invalid configuration: ${name} is required when APP_ENV=production`);
    }
  }
  return Object.freeze(parsed);
}
