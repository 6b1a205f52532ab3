import { fileURLToPath } from 'node:url';
import { ConfigError, configTable, misspelledVariables, readmeSection } from '@tessera/config';
import { describe, expect, it } from 'vitest';
import { loadConfig, loadQueueConfig, MailerConfigSchema, smtpCertificateUnchecked } from './config.ts';

/** The one-line message an operator sees when the mailer refuses to start. */
function startupError(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    const { message } = error as ConfigError;
    expect(message).not.toContain('\n');
    return message;
  }
  throw new Error('loadConfig accepted the configuration');
}

describe('loadConfig', () => {
  it('refuses to guess development where the platform says production (NODE_ENV): it would write codes to disk', () => {
    expect(startupError({ NODE_ENV: 'production', SMTP_URL: 'smtp://mail' })).toMatch(
      /^Invalid configuration: APP_ENV is not set and NODE_ENV=production: set APP_ENV=production to deploy/,
    );
    expect(loadConfig({ NODE_ENV: 'production', APP_ENV: 'development' }).env).toBe('development');
  });

  it('refuses production without SMTP_URL', () => {
    expect(startupError({ APP_ENV: 'production' })).toBe(
      'Invalid configuration: SMTP_URL is required when APP_ENV=production',
    );
  });

  it('refuses production without an explicit MAIL_FROM', () => {
    expect(
      startupError({ APP_ENV: 'production', SMTP_URL: 'smtps://mailer:secret@smtp.example.com:465' }),
    ).toBe('Invalid configuration: MAIL_FROM is required when APP_ENV=production');
  });

  it('refuses production without MAIL_JOB_KEY, the key that opens the codes of the jobs', () => {
    expect(
      startupError({
        APP_ENV: 'production',
        SMTP_URL: 'smtps://smtp.example.com:465',
        MAIL_FROM: 'a@example.com',
      }),
    ).toBe('Invalid configuration: MAIL_JOB_KEY is required when APP_ENV=production');
    expect(startupError({ MAIL_JOB_KEY: 'k1' })).toMatch(/^Invalid configuration: MAIL_JOB_KEY must be /);
  });

  it("refuses in production the development mail job key, which Tessera's source publishes", () => {
    expect(
      startupError({
        APP_ENV: 'production',
        SMTP_URL: 'smtps://smtp.example.com:465',
        MAIL_FROM: 'a@example.com',
        MAIL_JOB_KEY: 'dev:aChNVorgtIZLj1LNoVvwAEamqBbsYjg+vtnPaa4kqdg=',
      }),
    ).toBe(
      "Invalid configuration: MAIL_JOB_KEY holds the development key, which Tessera's source publishes: generate one",
    );
  });

  it('refuses in production the development sender, at a .localhost domain that receivers refuse', () => {
    const production = {
      APP_ENV: 'production',
      SMTP_URL: 'smtps://smtp.example.com:465',
      MAIL_JOB_KEY: `k1:${'A'.repeat(43)}=`,
    };
    for (const from of ['Tessera <no-reply@tessera.localhost>', 'no-reply@localhost', 'a@tessera.localhost.'])
      expect(startupError({ ...production, MAIL_FROM: from }), from).toBe(
        'Invalid configuration: MAIL_FROM must not be at localhost or a .localhost domain in production (receivers refuse it): use your domain',
      );
    expect(loadConfig({ ...production, MAIL_FROM: 'Acme <no-reply@localhost.example.com>' }).smtp.from).toBe(
      'Acme <no-reply@localhost.example.com>',
    );
  });

  it('refuses a queue on a Redis Cluster whose BULLMQ_PREFIX holds no hash tag, and a REDIS_URL of another scheme', () => {
    expect(startupError({ REDIS_CLUSTER_NODES: '10.0.0.1:6379', BULLMQ_PREFIX: 'bull' })).toMatch(
      /^Invalid configuration: BULLMQ_PREFIX must hold a hash tag/,
    );
    expect(loadQueueConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:6379' }).prefix).toBe('{tessera}');
    expect(() => loadQueueConfig({ REDIS_URL: 'http://:s3cret@cache:6379' })).toThrowError(
      /^Invalid configuration: REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL/,
    );
    // A base64 password's `/`, unencoded: one line naming the variable, not a stack trace with the password.
    const unencoded = startupError({ REDIS_URL: 'redis://tessera-mailer:Zm9v/YmFy+cXV4@redis:6379' });
    expect(unencoded).toMatch(
      /^Invalid configuration: REDIS_URL is no URL that can be read: percent-encode /,
    );
    expect(unencoded).not.toContain('YmFy');
  });

  it('names a MAILER_CONCURRENCY that is not a whole number in range', () => {
    expect(startupError({ MAILER_CONCURRENCY: 'abc' })).toBe(
      'Invalid configuration: MAILER_CONCURRENCY must be a whole number in decimal digits',
    );
    expect(startupError({ MAILER_CONCURRENCY: '0' })).toContain('MAILER_CONCURRENCY');
  });

  it('names an SMTP_URL that is not smtp:// or smtps://, or no URL, without quoting its password', () => {
    expect(startupError({ SMTP_URL: 'http://smtp.example.com' })).toMatch(
      /^Invalid configuration: SMTP_URL /,
    );
    expect(startupError({ SMTP_URL: 'smtps://mailer:S3CRET@smtp.example.com:46 5' })).toBe(
      'Invalid configuration: SMTP_URL is not a valid URL',
    );
  });

  it("refuses SMTP_URL's ?logger and ?debug, with which nodemailer prints whole emails and their codes", () => {
    for (const option of ['logger', 'debug'])
      expect(startupError({ SMTP_URL: `smtp://smtp.example.com:587/?${option}=true` })).toBe(
        `Invalid configuration: SMTP_URL must not set ?${option}: nodemailer would print whole emails, codes included`,
      );
    expect(
      loadConfig({ SMTP_URL: 'smtp://smtp.example.com:587/?logger=false&socketTimeout=60000' }).smtp.url,
    ).toBe('smtp://smtp.example.com:587/?logger=false&socketTimeout=60000');
  });

  it("refuses SMTP_URL's pool settings, which nodemailer would take over SMTP_MAX_CONNECTIONS and SMTP_MAX_MESSAGES unseen", () => {
    expect(startupError({ SMTP_URL: 'smtp://smtp.example.com:587/?maxConnections=50' })).toBe(
      'Invalid configuration: SMTP_URL must not set ?maxConnections: set SMTP_MAX_CONNECTIONS instead',
    );
    expect(
      startupError({ SMTP_URL: 'smtp://smtp.example.com:587/?name=mail.example.com&maxMessages=1' }),
    ).toBe('Invalid configuration: SMTP_URL must not set ?maxMessages: set SMTP_MAX_MESSAGES instead');
    expect(startupError({ SMTP_URL: 'smtp://smtp.example.com:587/?pool=false' })).toBe(
      'Invalid configuration: SMTP_URL must not set ?pool: set SMTP_MAX_CONNECTIONS instead',
    );
  });

  it("tells an SMTP_URL that turns off the server's certificate check, as nodemailer reads it", () => {
    const unchecked = (url: string) => smtpCertificateUnchecked(loadConfig({ SMTP_URL: url }));
    expect(unchecked('smtps://smtp.example.com:465')).toBe(false);
    expect(unchecked('smtp://smtp.example.com:587/?tls.rejectUnauthorized=true')).toBe(false);
    expect(unchecked('smtp://smtp.example.com:587/?tls.servername=mail.example.com')).toBe(false);
    for (const value of ['false', '0', ''])
      expect(unchecked(`smtp://smtp.example.com:587/?tls.rejectUnauthorized=${value}`), value).toBe(true);
  });

  it('names a MAIL_FROM that holds no address', () => {
    for (const from of ['Tessera', ' ', 'Tessera <no-reply>'])
      expect(startupError({ MAIL_FROM: from }), from).toMatch(
        /^Invalid configuration: MAIL_FROM must be an address/,
      );
    for (const from of [
      'no-reply@example.com',
      'Tessera <no-reply@example.com>',
      '"Tessera, Inc." <a@b.example>',
    ])
      expect(loadConfig({ MAIL_FROM: from }).smtp.from).toBe(from);
  });

  it('refuses a MAIL_FROM that mail servers or nodemailer would read otherwise than written', () => {
    for (const [from, problem] of [
      ['Acme\r\nBcc: x@evil.example <a@acme.example>', 'must not hold control characters (a line break)'],
      [
        'Acme: Accounts <no-reply@acme.example>',
        'must quote a display name that holds ( ) , : ; or ": "Acme: Accounts" <no-reply@acme.example>',
      ],
      [
        'Acme (EU) <no-reply@acme.example>',
        'must quote a display name that holds ( ) , : ; or ": "Acme (EU)" <no-reply@acme.example>',
      ],
      [
        'Acme; Inc <no-reply@acme.example>',
        'must quote a display name that holds ( ) , : ; or ": "Acme; Inc" <no-reply@acme.example>',
      ],
      ['Ünï <ü@acme.example>', 'must have an address whose part before the @ is ASCII'],
      [
        'Café "Le Bon" <no-reply@acme.example>',
        'must quote a display name that holds ( ) , : ; or ": "Café \\"Le Bon\\"" <no-reply@acme.example>',
      ],
    ])
      expect(startupError({ MAIL_FROM: from }), from).toBe(`Invalid configuration: MAIL_FROM ${problem}`);
    for (const from of [
      '"Acme: Accounts" <no-reply@acme.example>',
      '"Acme (EU)" <no-reply@acme.example>',
      'Açaí Café <no-reply@acme.example>',
      "O'Brien <no-reply@acme.example>",
      'no-reply@bücher.example',
      '" Acme " <no-reply@acme.example>',
      '"Café \\"Le Bon\\"" <no-reply@acme.example>',
    ])
      expect(loadConfig({ MAIL_FROM: from }).smtp.from).toBe(from);
  });

  it('takes the account page of MAIL_ACCOUNT_URL as a URL writes it, and refuses one an email must not link to', () => {
    expect(loadConfig({}).accountUrl).toBeUndefined();
    expect(loadConfig({ MAIL_ACCOUNT_URL: 'https://auth.example.com' }).accountUrl).toBe(
      'https://auth.example.com/',
    );
    expect(loadConfig({ MAIL_ACCOUNT_URL: 'http://localhost:3000/account/' }).accountUrl).toBe(
      'http://localhost:3000/account/',
    );
    expect(startupError({ MAIL_ACCOUNT_URL: 'auth.example.com/account/' })).toMatch(
      /^Invalid configuration: MAIL_ACCOUNT_URL /,
    );
    expect(startupError({ MAIL_ACCOUNT_URL: 'https://' })).toBe(
      'Invalid configuration: MAIL_ACCOUNT_URL must be an address such as `https://auth.example.com/account/`',
    );
    expect(startupError({ MAIL_ACCOUNT_URL: 'https://ops:hunter2@auth.example.com/account/' })).toBe(
      'Invalid configuration: MAIL_ACCOUNT_URL must not hold a user name or password',
    );
    const production = {
      APP_ENV: 'production',
      SMTP_URL: 'smtps://smtp.example.com:465',
      MAIL_FROM: 'Acme <no-reply@acme.example>',
      MAIL_JOB_KEY: `k1:${'A'.repeat(43)}=`,
    };
    expect(startupError({ ...production, MAIL_ACCOUNT_URL: 'http://auth.acme.example/account/' })).toBe(
      'Invalid configuration: MAIL_ACCOUNT_URL must be `https://` in production',
    );
    expect(
      loadConfig({ ...production, MAIL_ACCOUNT_URL: 'https://auth.acme.example/account/' }).accountUrl,
    ).toBe('https://auth.acme.example/account/');
  });

  it('names an operations knob out of range', () => {
    expect(startupError({ MAILER_RATE_LIMIT: '-1' })).toMatch(/^Invalid configuration: MAILER_RATE_LIMIT /);
    expect(startupError({ SHUTDOWN_TIMEOUT: '0' })).toMatch(/^Invalid configuration: SHUTDOWN_TIMEOUT /);
    expect(startupError({ MAILER_METRICS_PORT: '70000' })).toMatch(
      /^Invalid configuration: MAILER_METRICS_PORT /,
    );
  });

  it('has operations defaults: metrics on 0.0.0.0:9464, no rate limit, 30 s to finish jobs on SIGTERM', () => {
    expect(loadConfig({})).toMatchObject({
      ops: { host: '0.0.0.0', port: 9464 },
      worker: { rateLimit: 0, lockDuration: 10_000, stalledInterval: 5000 },
      shutdownTimeout: 30,
    });
    expect(loadConfig({ MAILER_RATE_LIMIT: '50', MAILER_METRICS_PORT: '0' })).toMatchObject({
      worker: { rateLimit: 50 },
      ops: { port: 0 },
    });
  });

  it('starts in development with no mail server, writing to the outbox', () => {
    const config = loadConfig({ MAILER_CONCURRENCY: '10' });
    expect(config).toMatchObject({
      env: 'development',
      worker: { concurrency: 10 },
      queue: { prefix: '{tessera}' },
    });
    expect(config.smtp.url).toBeUndefined();
    expect(config.smtp.outboxDir).toMatch(/tessera[/\\]outbox$/);
  });
});

describe('the README', () => {
  it('documents every variable with its default, as the schema says (UPDATE_README=1 rewrites it)', () => {
    const readme = fileURLToPath(new URL('../../../README.md', import.meta.url));
    const table = configTable(MailerConfigSchema);
    expect(readmeSection(readme, 'config:mailer', process.env.UPDATE_README ? table : undefined)).toBe(table);
  });
});

describe('misspelledVariables', () => {
  it("names a mailer setting's misspelling, and none of the gateway's settings beside it in one .env", () => {
    const env = {
      MAILER_CONCURENCY: '50',
      SMTP_MAX_CONNECTION: '4',
      SMTP_URL: 'smtp://mail',
      PORT: '3000',
      HOST: '0.0.0.0',
      OPS_HOST: '0.0.0.0',
      OPS_PORT: '9465',
      DATABASE_URL: 'postgres://db/tessera',
      REDIS_KEY_PREFIX: 'tessera:',
      OTP_SECRET: 'x',
      JWT_PRIVATE_KEY_FILE: '/run/secrets/jwt',
      CORS_ORIGINS: 'https://app.example',
      SMTP_TLS: 'true',
      API_PORT: 'tcp://10.0.0.3:80',
    };
    expect(misspelledVariables(MailerConfigSchema, env)).toEqual([
      { name: 'MAILER_CONCURENCY', meant: 'MAILER_CONCURRENCY' },
      { name: 'SMTP_MAX_CONNECTION', meant: 'SMTP_MAX_CONNECTIONS' },
    ]);
  });
});
