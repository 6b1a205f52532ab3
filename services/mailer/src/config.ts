import os from 'node:os';
import path from 'node:path';
import {
  ConfigError,
  checkQueueSettings,
  parseSetting,
  readConfig,
  requireInProduction,
  shared,
  variable,
} from '@tessera/config';
import { type MailJobKeys, parseMailJobKeys } from '@tessera/contracts';
import addressparser from 'nodemailer/lib/addressparser';
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
  mailJobKey: shared.mailJobKey,
  smtp: Type.Object({
    url: Type.Optional(
      variable(
        'SMTP_URL',
        Type.String({
          pattern: '^smtps?://',
          description:
            "`smtp://user:pass@host:587` (upgraded with STARTTLS, which production requires: `?requireTLS=false` allows a server that offers none, such as a relay on the same host) or `smtps://…:465`. Query options go to nodemailer: `?name=mail.example.com` is the name the mailer gives in `EHLO` (by default the host's name if it holds a dot, else `[127.0.0.1]`); `?socketTimeout=300000` (ms) waits longer than the 2 minutes of silence after which the mailer leaves a connection and retries the email over another (`connectionTimeout`: 10 s to connect and be greeted, `greetingTimeout`: 10 s for the greeting within that, so raise both for a slow greeting; `idleTimeout`, after which an unused connection is closed: 60 s); `?maxConnections`, `?maxMessages` and `?pool` are refused (the variables below set them); `?logger` and `?debug`, which would print whole emails, codes included, are refused. Required in production; unset in development, mail goes to the outbox.",
        }),
      ),
    ),
    from: variable(
      'MAIL_FROM',
      Type.String({
        default: 'Tessera <no-reply@tessera.localhost>',
        description:
          'Sender. Its display name (or, without one, its domain) names the product in the emails: `7531 is your Acme sign-in code`. Required in production, and not at a `.localhost` domain there.',
      }),
    ),
    outboxDir: variable(
      'MAIL_OUTBOX_DIR',
      Type.String({
        minLength: 1,
        default: path.join(os.homedir(), '.cache', 'tessera', 'outbox'),
        description: 'Where development mail goes as `.eml` files when `SMTP_URL` is unset.',
      }),
    ),
    maxConnections: variable(
      'SMTP_MAX_CONNECTIONS',
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: 10,
        description:
          'SMTP connections one mailer process keeps open and sends over (each carries one message at a time). 1 to 100.',
      }),
    ),
    maxMessages: variable(
      'SMTP_MAX_MESSAGES',
      Type.Integer({
        minimum: 1,
        maximum: 100_000,
        default: 1000,
        description:
          'Messages sent over one SMTP connection before it is replaced by a new one; lower it for a server that limits messages per connection. At most 100,000.',
      }),
    ),
  }),
  worker: Type.Object({
    concurrency: variable(
      'MAILER_CONCURRENCY',
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: 50,
        description:
          'Jobs one mailer process works on at once; their emails wait for a free SMTP connection (`SMTP_MAX_CONNECTIONS`). 1 to 100.',
      }),
    ),
    rateLimit: variable(
      'MAILER_RATE_LIMIT',
      Type.Integer({
        minimum: 0,
        maximum: 100_000,
        default: 0,
        description:
          "Most emails per second, all mailer processes together (BullMQ's limiter); `0` = no limit. At most 100,000.",
      }),
    ),
    lockDuration: variable(
      'MAILER_LOCK_DURATION_MS',
      Type.Integer({
        minimum: 500,
        maximum: 300_000,
        default: 10_000,
        description:
          "How long a mailer's hold on a job lasts unless renewed (it renews every half of this while it sends, however slow SMTP is); a crashed mailer's jobs are queued again within this plus `MAILER_STALLED_INTERVAL_MS`. 500 to 300,000.",
      }),
    ),
    stalledInterval: variable(
      'MAILER_STALLED_INTERVAL_MS',
      Type.Integer({
        minimum: 100,
        maximum: 300_000,
        default: 5000,
        description:
          'How often a mailer looks for jobs whose mailer crashed, and queues them again. 100 to 300,000.',
      }),
    ),
  }),
  accountUrl: Type.Optional(
    variable(
      'MAIL_ACCOUNT_URL',
      Type.String({
        pattern: '^https?://',
        description:
          "Where a user keeps their account: your app's account page, or Tessera's account console (`https://auth.example.com/account/`). The deletion notices link to it, to cancel the deletion and sign out devices; without it they say to sign in and name no place. `https://` in production.",
      }),
    ),
  ),
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
      Type.String({ minLength: 1, default: '0.0.0.0', description: 'Address of that port.' }),
    ),
  }),
});

type Env = Static<typeof MailerConfigSchema>;

/** The mailer's configuration: the schema's shape, with `MAIL_JOB_KEY` parsed. */
export type MailerConfig = Readonly<Omit<Env, 'mailJobKey'> & { mailJobKeys: MailJobKeys }>;

// `address@example.com`, or `Name <address@example.com>`.
const SENDER = /^(?:[^<>]*<[^\s<>@]+@[^\s<>@]+>|[^\s<>@]+@[^\s<>@]+)$/;

/**
 * What is wrong with a MAIL_FROM the pattern above takes, as nodemailer will read it: a control
 * character (a line break), a display name it reads otherwise than written (`Acme: Accounts`, a
 * group; `Acme (EU)`, whose comment goes), or a local part outside ASCII, which a server without
 * SMTPUTF8 refuses. Undefined when it is fine.
 */
function senderProblem(from: string): string | undefined {
  if (/\p{Cc}/u.test(from)) return 'must not hold control characters (a line break)';
  // Flattened: `Acme: Accounts <…>` is a group named Acme, of one member named Accounts.
  const [sender, ...more] = addressparser(from, { flatten: true });
  if (sender === undefined || more.length > 0) return 'must be one address';
  const written = from.includes('<') ? from.slice(0, from.lastIndexOf('<')).trim() : '';
  const name = (/^".*"$/.test(written) ? written.slice(1, -1).replaceAll(/\\(.)/g, '$1') : written).trim();
  if (sender.name.trim() !== name) {
    const quoted = `"${name.replaceAll(/["\\]/g, '\\$&')}"`;
    return `must quote a display name that holds ( ) , : ; or ": ${quoted} <${sender.address}>`;
  }
  if (/[^\x21-\x7e]/.test(sender.address.slice(0, sender.address.lastIndexOf('@'))))
    return 'must have an address whose part before the @ is ASCII';
  return undefined;
}

/**
 * The account page's address, linked in emails, as a URL writes it (a space encoded, a bare host given
 * its `/`). Refused: not a URL, a user name or password in it (an email is no place for them), or plain
 * `http://` in production (a page where a user signs in).
 */
function accountPage(text: string | undefined, production: boolean): string | undefined {
  if (text === undefined) return undefined;
  const url = URL.parse(text);
  const problem = !url?.hostname
    ? 'must be an address such as `https://auth.example.com/account/`'
    : url.username || url.password
      ? 'must not hold a user name or password'
      : production && url.protocol !== 'https:'
        ? 'must be `https://` in production'
        : undefined;
  if (problem) throw new ConfigError(`Invalid configuration: MAIL_ACCOUNT_URL ${problem}`);
  return url?.href;
}

/** Reads, validates and freezes the mailer configuration; throws one line naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): MailerConfig {
  const { mailJobKey, ...config } = readConfig(MailerConfigSchema, env);
  // Checked on the raw environment: MAIL_FROM has a default that production must not rely on.
  requireInProduction(env, [['SMTP_URL'], ['MAIL_FROM'], ['MAIL_JOB_KEY']]);
  // Not quoted back: the URL holds the SMTP password.
  if (config.smtp.url !== undefined && !URL.canParse(config.smtp.url))
    throw new ConfigError('Invalid configuration: SMTP_URL is not a valid URL');
  const { searchParams } = new URL(config.smtp.url ?? 'smtp://outbox');
  for (const option of ['logger', 'debug'])
    if ((searchParams.get(option) ?? 'false') !== 'false')
      throw new ConfigError(
        `Invalid configuration: SMTP_URL must not set ?${option}: nodemailer would print whole emails, codes included`,
      );
  // nodemailer takes the URL's query over the mailer's settings: one of these would win unseen.
  for (const [option, variable] of [
    ['maxConnections', 'SMTP_MAX_CONNECTIONS'],
    ['maxMessages', 'SMTP_MAX_MESSAGES'],
    ['pool', 'SMTP_MAX_CONNECTIONS'],
  ] as const)
    if (searchParams.has(option))
      throw new ConfigError(
        `Invalid configuration: SMTP_URL must not set ?${option}: set ${variable} instead`,
      );
  if (!SENDER.test(config.smtp.from.trim()))
    throw new ConfigError(
      'Invalid configuration: MAIL_FROM must be an address, such as `Tessera <no-reply@example.com>` or `no-reply@example.com`',
    );
  const problem = senderProblem(config.smtp.from.trim());
  if (problem) throw new ConfigError(`Invalid configuration: MAIL_FROM ${problem}`);
  const production = env.APP_ENV === 'production';
  // The development sender (docker-compose.yml's too): mail from a reserved domain is refused or junk.
  if (production && /@(?:[^@>]*\.)?localhost\.?>?$/i.test(config.smtp.from.trim()))
    throw new ConfigError(
      'Invalid configuration: MAIL_FROM must not be at localhost or a .localhost domain in production (receivers refuse it): use your domain',
    );
  const accountUrl = accountPage(config.accountUrl, production);
  checkQueueSettings(config.queue);
  return Object.freeze({
    ...config,
    accountUrl,
    mailJobKeys: parseSetting(() => parseMailJobKeys(mailJobKey, production)),
  });
}

/**
 * Whether SMTP_URL turns off the check of the server's certificate (`?tls.rejectUnauthorized=false`,
 * or `0`, or empty, as nodemailer reads its query): whoever answers at the server's address is sent
 * every code.
 */
export function smtpCertificateUnchecked(config: MailerConfig): boolean {
  const value = URL.parse(config.smtp.url ?? '')?.searchParams.get('tls.rejectUnauthorized');
  return value !== null && value !== undefined && (value === 'false' || Number(value) === 0);
}

export type QueueConfig = Static<typeof queue>;

/** Just where the queue is, for the operator commands: they need no SMTP settings, even in production. */
export function loadQueueConfig(env: NodeJS.ProcessEnv = process.env): QueueConfig {
  const config = readConfig(queue, env);
  checkQueueSettings(config);
  return config;
}
