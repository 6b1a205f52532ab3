import { fileURLToPath } from 'node:url';
import { configTable, misspelledVariables, readmeSection } from '@tessera/config';
import { describe, expect, it } from 'vitest';
import {
  GatewayConfigSchema,
  listenHost,
  loadConfig,
  loadOperatorConfig,
  misspelledOperatorVariables,
} from './config.ts';

const MAIL_JOB_KEY = `k1:${'A'.repeat(43)}=`;

describe('loadConfig', () => {
  it('runs development with no variables set, on the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      env: 'development',
      http: { port: 3000, opsPort: 9465, corsOrigins: [], trustProxy: false },
      database: { url: 'postgres://postgres@127.0.0.1:5432/tessera', poolSize: 10, statementTimeout: 10 },
      redis: { url: 'redis://127.0.0.1:6379' },
      jwt: { accessTokenTtl: 3600, clockTolerance: 30 },
      sessions: { refreshTokenTtl: 2_592_000, refreshReuseGrace: 10 },
      otp: {
        ttl: 300,
        maxAttempts: 5,
        resendCooldown: 60,
        maxSendsPerEmailPerHour: 5,
        maxSendsPerIpPerHour: 30,
        maxFailuresPerEmailPerDay: 20,
        maxFailuresPerIpPerHour: 50,
      },
      rateLimit: { max: 600, window: 60 },
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.otp)).toBe(true);
  });

  it('listens on this machine only unless in production, since development and test send codes back', () => {
    expect(listenHost(loadConfig({}))).toBe('localhost');
    expect(listenHost(loadConfig({ APP_ENV: 'test' }))).toBe('localhost');
    expect(listenHost(loadConfig({ HOST: '0.0.0.0' }))).toBe('0.0.0.0');
    const production = {
      APP_ENV: 'production',
      JWT_PRIVATE_KEY_FILE: '/k',
      OTP_SECRET: 'x'.repeat(32),
      MAIL_JOB_KEY,
    };
    expect(listenHost(loadConfig(production))).toBe('0.0.0.0');
    expect(listenHost(loadConfig({ ...production, HOST: '10.0.0.5' }))).toBe('10.0.0.5');
  });

  it('refuses what would start and then fail requests or sign users out, in one line naming the variable', () => {
    expect(() => loadConfig({ ACCESS_TOKEN_TTL: '3600', REFRESH_TOKEN_TTL: '1800' })).toThrowError(
      'Invalid configuration: REFRESH_TOKEN_TTL must not be shorter than ACCESS_TOKEN_TTL (a session ends when its refresh token expires)',
    );
    expect(loadConfig({ ACCESS_TOKEN_TTL: '900', REFRESH_TOKEN_TTL: '900' }).sessions.refreshTokenTtl).toBe(
      900,
    );
    // Read by ioredis as a Unix socket's path and said back, password included; or, upper-case, not
    // over TLS; or, on a cluster, without the credentials.
    for (const url of [
      'http://:s3cret@127.0.0.1:6379',
      'redis//:s3cret@127.0.0.1:6379',
      'redis:/:s3cret@cache',
      '/:s3cret@cache:6379',
      'REDISS://:s3cret@cache:6380',
      'rediss::s3cret@cache:6380',
      'user:s3cret@cache:6379',
    ])
      expect(() => loadConfig({ REDIS_URL: url }), url).toThrowError(
        "Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL (or a Unix socket's path)",
      );
    for (const url of ['rediss://user:s3cret@cache:6380/2', 'redis://[::1]:6379', '/var/run/redis.sock?db=2'])
      expect(loadConfig({ REDIS_URL: url }).redis.url).toBe(url);
    const nodes = { REDIS_CLUSTER_NODES: '10.0.0.1:6379' };
    expect(() => loadConfig({ ...nodes, REDIS_URL: '/var/run/redis.sock' })).toThrowError(
      /^Invalid configuration: REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL$/,
    );
    for (const url of ['not a url', '//app:s3cret@db:5432/tessera', 'socket:/var/run/postgresql?db=tessera'])
      expect(() => loadConfig({ DATABASE_URL: url }), url).toThrowError(
        'Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL (a Unix socket: postgres:///tessera?host=/var/run/postgresql)',
      );
    expect(loadConfig({ DATABASE_URL: 'postgresql:///tessera?host=/var/run/postgresql' }).database.url).toBe(
      'postgresql:///tessera?host=/var/run/postgresql',
    );
    // Read as URLs later, these fail with "Invalid URL", naming no variable (the mailer: its value too).
    const unreadable =
      /^Invalid configuration: (REDIS|DATABASE)_URL is no URL that can be read: percent-encode /;
    for (const env of [
      { REDIS_URL: 'redis://tessera-gateway:Zm9v/s3cret+cXV4@redis:6379' },
      { REDIS_URL: 'rediss://user:s3cret@cache:port' },
      { DATABASE_URL: 'postgres://tessera:Zm9v/s3cret@db:5432/tessera' },
      { DATABASE_URL: 'postgres://tessera:s3cret@db:port/tessera' },
    ]) {
      expect(() => loadConfig(env), Object.values(env)[0]).toThrowError(unreadable);
      expect(() => loadConfig(env)).not.toThrowError(/s3cret/);
    }
    // No host after the credentials is node-postgres's way to a socket named in the query.
    const socket = 'postgres://tessera:s3cret@/tessera?host=/var/run/postgresql';
    expect(loadConfig({ DATABASE_URL: socket }).database.url).toBe(socket);
    expect(() => loadConfig({ BULLMQ_PREFIX: '{tessera}\r' })).toThrowError(
      'Invalid configuration: BULLMQ_PREFIX must not contain blanks',
    );
    const cluster = { REDIS_CLUSTER_NODES: '10.0.0.1:6379,10.0.0.2:6379' };
    expect(() => loadConfig({ ...cluster, BULLMQ_PREFIX: 'bull' })).toThrowError(
      /^Invalid configuration: BULLMQ_PREFIX must hold a hash tag, such as \{tessera\}, when REDIS_CLUSTER_NODES is set/,
    );
    expect(loadConfig({ ...cluster, BULLMQ_PREFIX: 'app{mail}' }).mail.queuePrefix).toBe('app{mail}');
    expect(loadConfig({ BULLMQ_PREFIX: 'bull' }).mail.queuePrefix).toBe('bull');
    for (const name of ['JWT_ISSUER', 'JWT_AUDIENCE'])
      expect(() => loadConfig({ [name]: 'https://auth.example.com\r' })).toThrowError(
        `Invalid configuration: ${name} must not begin or end with a blank`,
      );
  });

  it('reads TRUST_PROXY with the blanks of a CRLF env file around it', () => {
    const { trustProxy } = loadConfig({ TRUST_PROXY: '1\r' }).http;
    expect(
      typeof trustProxy === 'function' && [trustProxy('10.0.0.1', 0), trustProxy('10.0.0.1', 1)],
    ).toEqual([true, false]);
    expect(loadConfig({ TRUST_PROXY: ' true ' }).http.trustProxy).toBe(true);
  });

  it('fails with one line naming a malformed variable', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrowError(
      /^Invalid configuration: PORT must be a whole number in decimal digits$/,
    );
    // Not read as 16 seconds and 1,000 sends.
    expect(() => loadConfig({ OTP_TTL: '0x10' })).toThrowError(/OTP_TTL must be a whole number/);
    expect(() => loadConfig({ OTP_MAX_SENDS_PER_IP_PER_HOUR: '1e3' })).toThrowError(
      /OTP_MAX_SENDS_PER_IP_PER_HOUR must be a whole number/,
    );
    expect(loadConfig({ OTP_TTL: ' 120 ' }).otp.ttl).toBe(120);
    expect(() => loadConfig({ APP_ENV: 'staging' })).toThrowError(
      /^Invalid configuration: APP_ENV must be one of development, test, production$/,
    );
    expect(() => loadConfig({ LOG_LEVEL: 'verbose' })).toThrowError(
      /^Invalid configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent$/,
    );
  });

  it('refuses values no deployment means: past a date or a timer, or checking nothing', () => {
    // Past a date (every sign-in a 500), past a timer (a sweep in a busy loop), or no `iss` check.
    expect(() => loadConfig({ REFRESH_TOKEN_TTL: '99999999999999' })).toThrowError(
      'Invalid configuration: REFRESH_TOKEN_TTL must be <= 31536000',
    );
    expect(() => loadConfig({ OTP_TTL: '10000000000000' })).toThrowError(
      /^Invalid configuration: OTP_TTL must be <= 3600$/,
    );
    expect(() => loadConfig({ RETENTION_SWEEP_INTERVAL: '2592000' })).toThrowError(
      /RETENTION_SWEEP_INTERVAL must be <= 86400/,
    );
    expect(() => loadConfig({ ACCOUNT_DELETION_SWEEP_INTERVAL: '2592000' })).toThrowError(
      /ACCOUNT_DELETION_SWEEP_INTERVAL must be <= 86400/,
    );
    expect(() => loadConfig({ REFRESH_REUSE_GRACE: '99999999' })).toThrowError(
      /REFRESH_REUSE_GRACE must be <= 300/,
    );
    expect(() => loadConfig({ JWT_ISSUER: '' })).toThrowError(
      /JWT_ISSUER must NOT have fewer than 1 characters/,
    );
    expect(() => loadConfig({ JWT_AUDIENCE: '' })).toThrowError(/JWT_AUDIENCE must NOT have fewer than 1/);
    // An unfilled `VAR=` line, or a secret of blanks.
    for (const name of [
      'DATABASE_URL',
      'REDIS_URL',
      'BULLMQ_PREFIX',
      'PRIVACY_POLICY_VERSION',
      'HOST',
      'CONSOLE_DIR',
      'JWT_PRIVATE_KEY',
      'JWT_PRIVATE_KEY_FILE',
      'JWT_VERIFY_KEYS',
      'JWT_VERIFY_KEY_FILES',
    ])
      expect(() => loadConfig({ [name]: '' }), name).toThrowError(
        `${name} must NOT have fewer than 1 characters`,
      );
    expect(() => loadConfig({ OTP_SECRET: ' '.repeat(36) })).toThrowError(
      'Invalid configuration: OTP_SECRET must hold at least 32 characters other than blanks',
    );
    for (const env of [
      { ACCESS_TOKEN_TTL: '60', REFRESH_REUSE_GRACE: '60' },
      { REFRESH_TOKEN_TTL: '5', REFRESH_REUSE_GRACE: '10' },
    ])
      expect(() => loadConfig(env)).toThrowError(
        'Invalid configuration: REFRESH_REUSE_GRACE must be shorter than ACCESS_TOKEN_TTL and REFRESH_TOKEN_TTL',
      );
    expect(loadConfig({ ACCESS_TOKEN_TTL: '60', REFRESH_REUSE_GRACE: '59' }).sessions.refreshReuseGrace).toBe(
      59,
    );
    expect(() => loadConfig({ OTP_TTL: '60', OTP_RESEND_COOLDOWN: '90' })).toThrowError(
      'Invalid configuration: OTP_RESEND_COOLDOWN must not be longer than OTP_TTL (a user would wait for a new code with none valid)',
    );
    expect(loadConfig({ OTP_TTL: '60', OTP_RESEND_COOLDOWN: '60' }).otp.resendCooldown).toBe(60);
    for (const [name, value] of [
      ['PRIVACY_POLICY_VERSION', '2.0 '],
      ['TERMS_OF_USE_VERSION', ' 1.1'],
      ['CONSENT_FORM_VERSION', ' '],
    ] as const)
      expect(() => loadConfig({ [name]: value }), name).toThrowError(
        `Invalid configuration: ${name} must not begin or end with a blank`,
      );
    // A secret read from a file ends with a newline.
    expect(loadConfig({ OTP_SECRET: `${'s'.repeat(32)}\n` }).otp.secret).toBe(`${'s'.repeat(32)}\n`);
  });

  it('refuses to guess development where the platform says production (NODE_ENV), since development answers codes', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrowError(
      'Invalid configuration: APP_ENV is not set and NODE_ENV=production: set APP_ENV=production to deploy (development answers sign-in codes to whoever asks), or APP_ENV=development',
    );
    expect(loadConfig({ NODE_ENV: 'production', APP_ENV: 'development' }).env).toBe('development');
    expect(loadConfig({ NODE_ENV: 'development' }).env).toBe('development');
  });

  it('refuses production without signing keys, the OTP secret or the mail job key', () => {
    expect(() => loadConfig({ APP_ENV: 'production', OTP_SECRET: 'x'.repeat(32) })).toThrowError(
      'Invalid configuration: JWT_PRIVATE_KEY or JWT_PRIVATE_KEY_FILE is required when APP_ENV=production',
    );
    expect(() => loadConfig({ APP_ENV: 'production', JWT_PRIVATE_KEY_FILE: '/keys/k.pem' })).toThrowError(
      'Invalid configuration: OTP_SECRET is required when APP_ENV=production',
    );
    expect(() =>
      loadConfig({ APP_ENV: 'production', JWT_PRIVATE_KEY_FILE: '/k', OTP_SECRET: 'short' }),
    ).toThrowError(/OTP_SECRET must NOT have fewer than 32 characters/);
    expect(() =>
      loadConfig({ APP_ENV: 'production', JWT_PRIVATE_KEY_FILE: '/k', OTP_SECRET: 'x'.repeat(32) }),
    ).toThrowError('Invalid configuration: MAIL_JOB_KEY is required when APP_ENV=production');
    expect(
      loadConfig({
        APP_ENV: 'production',
        JWT_PRIVATE_KEY_FILE: '/k',
        OTP_SECRET: 'x'.repeat(32),
        MAIL_JOB_KEY: MAIL_JOB_KEY,
      }).env,
    ).toBe('production');
  });

  it("refuses in production the development OTP secret and mail job key, which Tessera's source publishes", () => {
    const production = { APP_ENV: 'production', JWT_PRIVATE_KEY_FILE: '/k', MAIL_JOB_KEY };
    // As it is, and as a secret file holds it, with a trailing newline.
    for (const OTP_SECRET of [
      'tessera-development-otp-secret-not-for-production',
      'tessera-development-otp-secret-not-for-production\n',
    ])
      expect(() => loadConfig({ ...production, OTP_SECRET })).toThrowError(
        "Invalid configuration: OTP_SECRET is the development secret, which Tessera's source publishes: generate one",
      );
    expect(() =>
      loadConfig({
        ...production,
        OTP_SECRET: 'x'.repeat(32),
        // The development key under another id, spelled with other padding bits (the same bytes).
        MAIL_JOB_KEY: `k2:${'B'.repeat(43)}=,prod:aChNVorgtIZLj1LNoVvwAEamqBbsYjg+vtnPaa4kqdh=`,
      }),
    ).toThrowError(
      "Invalid configuration: MAIL_JOB_KEY holds the development key, which Tessera's source publishes: generate one",
    );
    // In development they are what an unconfigured gateway and mailer agree on.
    expect(loadConfig({ OTP_SECRET: 'tessera-development-otp-secret-not-for-production' }).env).toBe(
      'development',
    );
  });

  it('refuses two signing keys: a new key file beside the old key in the environment would be ignored', () => {
    expect(() =>
      loadConfig({ JWT_PRIVATE_KEY: 'old key', JWT_PRIVATE_KEY_FILE: '/keys/new-key.pem' }),
    ).toThrowError(
      'Invalid configuration: set JWT_PRIVATE_KEY or JWT_PRIVATE_KEY_FILE, not both (the signing key is one of them)',
    );
  });

  it('reads MAIL_JOB_KEY as keys by id, the first sealing, and names a malformed one', () => {
    const { sealing, opening } = loadConfig({ MAIL_JOB_KEY: `k2:${'B'.repeat(43)}=,${MAIL_JOB_KEY}` }).mail
      .jobKeys;
    expect(sealing.id).toBe('k2');
    expect([...opening.keys()]).toEqual(['k2', 'k1']);
    expect(() => loadConfig({ MAIL_JOB_KEY: 'k1:c2hvcnQ=' })).toThrowError(
      'Invalid configuration: MAIL_JOB_KEY must be comma-separated kid:base64 entries of 32-byte keys',
    );
    expect(() => loadConfig({ MAIL_JOB_KEY: `${MAIL_JOB_KEY},${MAIL_JOB_KEY}` })).toThrowError(
      'Invalid configuration: MAIL_JOB_KEY names a key id twice',
    );
  });

  it('reads TRUST_PROXY as a flag, a hop count or a list of proxies', () => {
    expect(loadConfig({ TRUST_PROXY: 'true' }).http.trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).http.trustProxy).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
    ]);
    const hops = loadConfig({ TRUST_PROXY: '1' }).http.trustProxy as (
      address: string,
      hop: number,
    ) => boolean;
    expect([hops('x', 0), hops('x', 1)]).toEqual([true, false]);
    expect(loadConfig({ TRUST_PROXY: '' }).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '::1, fd00::/8' }).http.trustProxy).toEqual(['::1', 'fd00::/8']);
    expect(loadConfig({ TRUST_PROXY: 'loopback,uniquelocal,10.0.0.0/255.0.0.0' }).http.trustProxy).toEqual([
      'loopback',
      'uniquelocal',
      '10.0.0.0/255.0.0.0',
    ]);
    for (const value of ['yes', '-1', '10.0.0.0/33', '10.0.0.0/255.0.0', '10.0.0.1,proxy.internal'])
      expect(() => loadConfig({ TRUST_PROXY: value }), value).toThrowError(
        /^Invalid configuration: TRUST_PROXY must be true, false, a hop count or proxy addresses\/CIDRs \(got "/,
      );
  });
});

describe('loadOperatorConfig', () => {
  const production = { APP_ENV: 'production', OTP_SECRET: 'x'.repeat(32) };

  it('reads only the sections the command uses, and requires in production only OTP_SECRET, to read the codes', () => {
    expect(loadOperatorConfig(production, ['otp'])).toEqual({
      env: 'production',
      log: { level: 'info' },
      redis: { url: 'redis://127.0.0.1:6379', clusterNodes: '', keyPrefix: 'tessera:' },
      otp: expect.objectContaining({ secret: 'x'.repeat(32), ttl: 300 }),
    });
    // Variables of sections it does not read are not read, nor refused.
    const ending = loadOperatorConfig({ APP_ENV: 'production', OTP_TTL: 'soon' }, ['database']);
    expect(ending).toMatchObject({ env: 'production', database: { poolSize: 10 } });
    expect(ending).not.toHaveProperty('otp');
    expect(loadOperatorConfig({ ...production, DATABASE_URL: 'mysql://x' }, ['otp'])).not.toHaveProperty(
      'database',
    );
    expect(() => loadOperatorConfig({ APP_ENV: 'production' }, ['otp'])).toThrowError(
      'Invalid configuration: OTP_SECRET is required when APP_ENV=production',
    );
  });

  it('checks what it reads as a gateway does', () => {
    for (const [env, error] of [
      [
        { OTP_SECRET: 'tessera-development-otp-secret-not-for-production' },
        'OTP_SECRET is the development secret',
      ],
      [{ OTP_SECRET: ' '.repeat(40) }, 'OTP_SECRET must hold at least 32 characters'],
      [{ DATABASE_URL: 'localhost/tessera' }, 'DATABASE_URL must be a postgres:// or postgresql:// URL'],
      [{ REDIS_URL: 'http://:s3cret@cache:6379' }, 'REDIS_URL must be a redis:// or rediss:// URL'],
      [{ OTP_TTL: '60', OTP_RESEND_COOLDOWN: '120' }, 'OTP_RESEND_COOLDOWN must not be longer than OTP_TTL'],
    ] as const)
      expect(() => loadOperatorConfig({ ...production, ...env }, ['database', 'otp'])).toThrowError(error);
  });
});

describe('misspelledOperatorVariables', () => {
  it("names the misspellings of what the command reads, not of the gateway's other settings", () => {
    const env = {
      REDIS_KEY_PREFX: 'tessera:',
      DATABASE_URI: 'postgres://db/tessera',
      OTP_SECRT: 'x',
      MAIL_JOB_KY: 'k',
    };
    expect(misspelledOperatorVariables(env, ['database'])).toEqual([
      { name: 'REDIS_KEY_PREFX', meant: 'REDIS_KEY_PREFIX' },
      { name: 'DATABASE_URI', meant: 'DATABASE_URL' },
    ]);
    expect(misspelledOperatorVariables(env, ['otp'])).toEqual([
      { name: 'REDIS_KEY_PREFX', meant: 'REDIS_KEY_PREFIX' },
      { name: 'OTP_SECRT', meant: 'OTP_SECRET' },
    ]);
  });
});

describe('misspelledVariables', () => {
  it('names a variable that looks like a setting and says which one it means, and no other', () => {
    const env = {
      CORS_ORIGIN: 'https://app.example',
      TRUST_PROXIES: '1',
      DATABASE_URI: 'postgres://db/tessera',
      otp_ttl: '120',
      ACCES_TOKEN_TTL: '600',
      CROS_ORIGINS: 'https://app.example',
      // The settings themselves, the mailer's (one .env for both), the machine's and the platform's.
      CORS_ORIGINS: 'https://app.example',
      SMTP_URL: 'smtp://mail',
      MAIL_FROM: 'Tessera <no-reply@example.com>',
      MAILER_CONCURRENCY: '50',
      PATH: '/usr/bin',
      HOME: '/root',
      HOSTNAME: 'gateway-1',
      NODE_ENV: 'production',
      NODE_OPTIONS: '--enable-source-maps',
      PGHOST: 'db',
      REDIS_PORT: 'tcp://10.0.0.2:6379',
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      // Kubernetes' variables of Services named api, app, cors and otp, and other conventions.
      API_PORT: 'tcp://10.0.0.3:80',
      APP_HOST: 'app.example',
      CORS_PORT: 'tcp://10.0.0.4:80',
      OTP_PORT: 'tcp://10.0.0.5:80',
      OPA_PORT: 'tcp://10.0.0.6:8181',
      DATABASE_SSL: 'true',
    };
    expect(misspelledVariables(GatewayConfigSchema, env)).toEqual([
      { name: 'CORS_ORIGIN', meant: 'CORS_ORIGINS' },
      { name: 'TRUST_PROXIES', meant: 'TRUST_PROXY' },
      { name: 'DATABASE_URI', meant: 'DATABASE_URL' },
      { name: 'otp_ttl', meant: 'OTP_TTL' },
      { name: 'ACCES_TOKEN_TTL', meant: 'ACCESS_TOKEN_TTL' },
      { name: 'CROS_ORIGINS', meant: 'CORS_ORIGINS' },
    ]);
  });
});

describe('the README', () => {
  it('documents every variable with its default, as the schema says (UPDATE_README=1 rewrites it)', () => {
    const readme = fileURLToPath(new URL('../../../README.md', import.meta.url));
    const table = configTable(GatewayConfigSchema);
    expect(readmeSection(readme, 'config:gateway', process.env.UPDATE_README ? table : undefined)).toBe(
      table,
    );
  });
});
