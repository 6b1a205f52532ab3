import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ConfigError,
  checkQueueSettings,
  checkRedisUrl,
  databaseUrlProblem,
  misspelledVariables,
  parseSetting,
  readConfig,
  requireInProduction,
  shared,
  variable,
  variablesOf,
} from '@tessera/config';
import { type MailJobKeys, parseMailJobKeys } from '@tessera/contracts';
import { type Static, Type } from 'typebox';

const Int = (
  name: string,
  defaultValue: number,
  description: string,
  range: { minimum?: number; maximum?: number } = {},
) => variable(name, Type.Integer({ minimum: 1, ...range, default: defaultValue, description }));
const Text = (name: string, defaultValue: string, description: string, rules: { minLength?: number } = {}) =>
  variable(name, Type.String({ ...rules, default: defaultValue, description }));
const Optional = (name: string, description: string, rules: { minLength?: number } = {}) =>
  Type.Optional(variable(name, Type.String({ ...rules, description })));

// An empty value is a mistake there (an unfilled `VAR=` line), not a setting; an empty issuer or
// audience would check nothing, an empty key file would be read as a file named "".
const NOT_EMPTY = { minLength: 1 };

// Upper bounds, so that no value overflows a date or a timer, or makes a rule meaningless.
const HOUR = 3600;
const DAY = 86_400;
const YEAR = 365 * DAY;

/** Every setting of the gateway: where it lives in the configuration, which variable sets it, what it means. */
export const GatewayConfigSchema = Type.Object({
  env: shared.appEnv,
  log: Type.Object({ level: shared.logLevel }),
  shutdownTimeout: shared.shutdownTimeout,
  http: Type.Object({
    port: Int('PORT', 3000, 'Port of the public API.', { minimum: 0, maximum: 65535 }),
    host: Optional(
      'HOST',
      'Address of the public API. Unset: `0.0.0.0` (every interface) in production; `localhost` (this machine only) in development and test, whose send answer carries the code: anyone who reached it could sign in as anyone.',
      NOT_EMPTY,
    ),
    opsPort: Int(
      'OPS_PORT',
      9465,
      'Operations port: `/metrics`, `/health/live`, `/health/ready`. Keep it off the public ingress.',
      {
        minimum: 0,
        maximum: 65535,
      },
    ),
    opsHost: Text('OPS_HOST', '0.0.0.0', 'Address of the operations port.', NOT_EMPTY),
    requestTimeout: Int(
      'REQUEST_TIMEOUT',
      15,
      'Seconds (at most 300) a client may take to send a whole request, headers and body; past it the answer is 408 and the connection is closed (only closed, for a request answered before its body arrived). A client that never finishes its body would otherwise hold its connection for good.',
      { maximum: 300 },
    ),
    keepAliveTimeout: Int(
      'KEEP_ALIVE_TIMEOUT',
      72,
      "Seconds (at most 3,600) an idle keep-alive connection stays open; Node closes it a second later. A proxy or load balancer that keeps connections to the gateway open must close its idle ones sooner, or it may send a request on one the gateway is closing and answer it with its own 502: nginx's `keepalive_timeout` (60 s), HAProxy and AWS's Application Load Balancer (60 s) do by default; Google Cloud's keep theirs 600–610 s by default, so set more here (620).",
      { maximum: 3600 },
    ),
    maxConnections: Int(
      'MAX_CONNECTIONS',
      4096,
      'Connections to the public API one gateway process keeps open at most (at most 65,536); more are closed as they arrive. Each costs up to ~25 KB of memory while its request is read (its headers at most 8 KB and 100 lines), so raise it only with `--max-old-space-size` and the memory limit. Fewer, with a warning at start, when the process may not open that many files: its hard limit of open files (`ulimit -Hn`, to which Node raises the soft one) less `DATABASE_POOL_SIZE` and 128 (its own files, probes, Redis).',
      { maximum: 65_536 },
    ),
    trustProxy: Text(
      'TRUST_PROXY',
      'false',
      'A hop count (`1` behind one load balancer) or a comma-separated list of proxy addresses/CIDRs (or `loopback`, `linklocal`, `uniquelocal`); the client IP then comes from `X-Forwarded-For` (an entry that is no IP address, with or without a port, counts as the connection peer). With a hop count, only the proxies may reach the gateway, or a client writes its own IP there; their addresses make that impossible. `true` trusts the whole header, so only use it behind a proxy that overwrites it.',
    ),
    corsOrigins: Text(
      'CORS_ORIGINS',
      '',
      'Comma-separated exact browser origins allowed to call the API (`https://app.example.com`); none by default, `*` refused.',
    ),
  }),
  database: Type.Object({
    url: Text(
      'DATABASE_URL',
      'postgres://postgres@127.0.0.1:5432/tessera',
      'Postgres, a `postgres://` or `postgresql://` URL (a Unix socket: `postgres:///tessera?host=/var/run/postgresql`) of one host: with a standby, an address that follows the primary (a virtual IP, a DNS name the failover moves, a proxy that checks for the primary; see Operations, "Postgres failover"). `pnpm db:migrate` creates the database in development.',
      NOT_EMPTY,
    ),
    poolSize: Int(
      'DATABASE_POOL_SIZE',
      10,
      "Postgres connections one gateway process opens at most for its requests (at most 1,000), and one more for its readiness probe. Every gateway's, the migrations' and your other clients' together must stay under the server's `max_connections`.",
      { maximum: 1000 },
    ),
    statementTimeout: Int(
      'DATABASE_STATEMENT_TIMEOUT',
      10,
      "Seconds (at most 600) a statement of the gateway may run, waiting for locks included; past it Postgres cancels it and a request answers 503 with `Retry-After`, instead of holding a pool connection. A statement still unanswered 1 s longer fails the same, its connection closed, when Postgres answers nothing on the readiness probe's connection either (3 s: a frozen host, a partition). The account deletion sweep has 10 minutes.",
      { maximum: 600 },
    ),
  }),
  redis: Type.Object({
    url: shared.redisUrl,
    clusterNodes: shared.redisClusterNodes,
    keyPrefix: variable(
      'REDIS_KEY_PREFIX',
      Type.String({
        pattern: '^[^{}]*$',
        default: 'tessera:',
        description:
          "Prefix of the gateway's Redis keys (empty: none). No braces: a hash tag there would put every key in one cluster slot.",
      }),
    ),
  }),
  mail: Type.Object({
    queuePrefix: shared.bullmqPrefix,
    jobKey: shared.mailJobKey,
  }),
  jwt: Type.Object({
    issuer: Text('JWT_ISSUER', 'tessera', '`iss` of access tokens, checked on every request.', NOT_EMPTY),
    audience: Text('JWT_AUDIENCE', 'tessera', '`aud` of access tokens, checked on every request.', NOT_EMPTY),
    privateKey: Optional(
      'JWT_PRIVATE_KEY',
      'PEM private key (Ed25519 → EdDSA, or P-256 → ES256). Production needs this or the next.',
      NOT_EMPTY,
    ),
    privateKeyFile: Optional(
      'JWT_PRIVATE_KEY_FILE',
      'File with that PEM key; default `~/.cache/tessera/dev-signing-key.pem`, which development and test create on first start (a file named here must exist).',
      NOT_EMPTY,
    ),
    verifyKeys: Optional(
      'JWT_VERIFY_KEYS',
      'PEM keys (private or public, several blocks allowed) that still verify tokens and are listed in the JWKS but no longer sign: the previous keys during a rotation.',
      NOT_EMPTY,
    ),
    verifyKeyFiles: Optional(
      'JWT_VERIFY_KEY_FILES',
      'The same as a comma-separated list of PEM files.',
      NOT_EMPTY,
    ),
    clockTolerance: Int(
      'JWT_CLOCK_TOLERANCE',
      30,
      "Seconds of clock difference between hosts forgiven when checking a token's expiry and that it was not issued in the future (at most 300).",
      {
        minimum: 0,
        maximum: 300,
      },
    ),
    accessTokenTtl: Int('ACCESS_TOKEN_TTL', 3600, 'Access-token lifetime, seconds (at most a week).', {
      maximum: 7 * DAY,
    }),
  }),
  sessions: Type.Object({
    refreshTokenTtl: Int(
      'REFRESH_TOKEN_TTL',
      2_592_000,
      'Refresh-token lifetime, seconds (at most a year, not shorter than `ACCESS_TOKEN_TTL`); each refresh extends the session by this much.',
      { maximum: YEAR },
    ),
    refreshReuseGrace: Int(
      'REFRESH_REUSE_GRACE',
      10,
      'Seconds (at most 300, and fewer than `ACCESS_TOKEN_TTL` and `REFRESH_TOKEN_TTL`) after a rotation in which the old refresh token still returns the same new pair (the newest, when that was refreshed too). `@tessera/client` asks again for a refresh whose answer it lost after 5 s: keep 10 or more for it.',
      {
        minimum: 0,
        maximum: 300,
      },
    ),
  }),
  otp: Type.Object({
    secret: Optional(
      'OTP_SECRET',
      "At least 32 characters other than blanks; key of the code hashes and of a rotated refresh token's sealed successor. Required in production (development uses a fixed value, which production refuses).",
      { minLength: 32 },
    ),
    ttl: Int('OTP_TTL', 300, 'Code lifetime, seconds (at most an hour).', { maximum: HOUR }),
    maxAttempts: Int('OTP_MAX_ATTEMPTS', 5, 'Wrong guesses that lock a code.'),
    resendCooldown: Int(
      'OTP_RESEND_COOLDOWN',
      60,
      'Seconds (at most an hour, and at most `OTP_TTL`) before another code may be sent to the same email. A send answers `resendIn`: this, or the longer wait when its code has just filled the hourly budget of the inbox or of the client IP.',
      {
        minimum: 0,
        maximum: HOUR,
      },
    ),
    maxSendsPerEmailPerHour: Int(
      'OTP_MAX_SENDS_PER_EMAIL_PER_HOUR',
      5,
      "Codes per inbox per rolling hour (an address's +tag variants, and at Gmail its dotted spellings, are one inbox).",
    ),
    maxSendsPerIpPerHour: Int('OTP_MAX_SENDS_PER_IP_PER_HOUR', 30, 'Codes per client IP per rolling hour.'),
    maxFailuresPerEmailPerDay: Int(
      'OTP_MAX_FAILURES_PER_EMAIL_PER_DAY',
      20,
      'Wrong codes evaluated per email per rolling 24 h; then every verification of the email, and every send to it, is 429.',
    ),
    maxFailuresPerIpPerHour: Int(
      'OTP_MAX_FAILURES_PER_IP_PER_HOUR',
      50,
      "Wrong codes per client IP per rolling hour; then that IP's verifications are 429.",
    ),
  }),
  rateLimit: Type.Object({
    max: Int(
      'RATE_LIMIT_MAX',
      600,
      'The general limit: requests per client IP per window, on every route but the health probes and the files of the account console.',
    ),
    window: Int('RATE_LIMIT_WINDOW', 60, 'Window of the general limit, seconds (at most a day).', {
      maximum: DAY,
    }),
  }),
  policies: Type.Object({
    privacyPolicyVersion: Text(
      'PRIVACY_POLICY_VERSION',
      '1.0.0',
      'Current privacy policy version a user must have accepted.',
      NOT_EMPTY,
    ),
    termsOfUseVersion: Text(
      'TERMS_OF_USE_VERSION',
      '1.0.0',
      'Current terms of use version a user must have accepted.',
      NOT_EMPTY,
    ),
    consentFormVersion: Optional(
      'CONSENT_FORM_VERSION',
      'Current consent form version; unset, no consent form is offered.',
      NOT_EMPTY,
    ),
  }),
  users: Type.Object({
    usernameChangeCooldown: Int(
      'USERNAME_CHANGE_COOLDOWN',
      2_592_000,
      'Seconds (at most a year) after a username change before the next one.',
      { maximum: YEAR },
    ),
    minAge: Int('MIN_AGE', 13, 'Youngest age, in years, a birth date may give (at most 130).', {
      minimum: 0,
      maximum: 130,
    }),
    deletionGrace: Int(
      'ACCOUNT_DELETION_GRACE',
      2_592_000,
      'Seconds (at most a year) between a deletion request and the erasure of the account; at 0 it is erased at the next sweep, with no deletion email (a notice of a date gone by is not sent).',
      {
        minimum: 0,
        maximum: YEAR,
      },
    ),
    deletionRequestCooldown: Int(
      'ACCOUNT_DELETION_REQUEST_COOLDOWN',
      600,
      'Seconds (at most a day) after a cancelled deletion before the account may schedule it again (429 until then): each change emails the account, so this bounds how often.',
      { maximum: DAY },
    ),
    deletionSweepInterval: Int(
      'ACCOUNT_DELETION_SWEEP_INTERVAL',
      60,
      'Seconds (at most a day) between two sweeps of a gateway process that erase the accounts whose deletion is due.',
      { maximum: DAY },
    ),
  }),
  retention: Type.Object({
    sessionRetention: Int(
      'SESSION_RETENTION',
      2_592_000,
      'Seconds (at most 10 years) an ended or expired session, and an expired refresh token, is kept before it is deleted.',
      { maximum: 10 * YEAR },
    ),
    securityEventRetention: Int(
      'SECURITY_EVENT_RETENTION',
      31_536_000,
      'Seconds (at most 10 years) a security event is kept before it is deleted. Below 30 days the gateway warns at start; each retention run that deletes events logs how many, and up to when.',
      { maximum: 10 * YEAR },
    ),
    sweepInterval: Int(
      'RETENTION_SWEEP_INTERVAL',
      3600,
      'Seconds (at most a day) between two runs of the retention sweep of a gateway process.',
      { maximum: DAY },
    ),
  }),
  docs: Type.Object({
    enabled: variable(
      'DOCS_ENABLED',
      Type.Boolean({
        default: true,
        description: 'Serve the API console at `/docs` and the OpenAPI document at `/docs/json`.',
      }),
    ),
  }),
  console: Type.Object({
    enabled: variable(
      'CONSOLE_ENABLED',
      Type.Boolean({
        default: true,
        description:
          'Serve the account console (sign-in, profile, sessions, deletion) at `/account/`. Without a build, `/account/` is a 404 saying how to build it; the gateway reads the build at start (restart it after building).',
      }),
    ),
    dir: Optional(
      'CONSOLE_DIR',
      "Folder of the console's build (`index.html` and `assets/`); default `apps/console/dist` of this repository.",
      NOT_EMPTY,
    ),
  }),
});

type Env = Static<typeof GatewayConfigSchema>;

/** Where `pnpm --filter @tessera/console build` writes the account console. */
const CONSOLE_BUILD = fileURLToPath(new URL('../../../apps/console/dist', import.meta.url));

const DEVELOPMENT_OTP_SECRET = 'tessera-development-otp-secret-not-for-production';

type TrustProxy = boolean | string[] | ((address: string, hop: number) => boolean);

/** The gateway's configuration: the schema's shape, with the few values that are parsed further. */
export type GatewayConfig = Readonly<
  Omit<Env, 'http' | 'mail' | 'otp' | 'jwt' | 'console'> & {
    http: Omit<Env['http'], 'trustProxy' | 'corsOrigins'> & { trustProxy: TrustProxy; corsOrigins: string[] };
    mail: Omit<Env['mail'], 'jobKey'> & { jobKeys: MailJobKeys };
    otp: Env['otp'] & { secret: string };
    jwt: Env['jwt'] & { privateKeyFile: string; createPrivateKeyFile: boolean };
    console: Env['console'] & { dir: string };
  }
>;

/** Where the public API listens: HOST, else every interface in production and this machine only otherwise. */
export function listenHost(config: GatewayConfig): string {
  return config.http.host ?? (config.env === 'production' ? '0.0.0.0' : 'localhost');
}

/** Reads, validates and freezes the gateway configuration; throws one line naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const config = readConfig(GatewayConfigSchema, env);
  requireInProduction(env, [['JWT_PRIVATE_KEY', 'JWT_PRIVATE_KEY_FILE'], ['OTP_SECRET'], ['MAIL_JOB_KEY']]);
  // One would be ignored: a rotation that sets the other (a new key file beside the Secret's key)
  // would go on signing with the old key, without a word.
  if (config.jwt.privateKey !== undefined && config.jwt.privateKeyFile !== undefined)
    throw new ConfigError(
      'Invalid configuration: set JWT_PRIVATE_KEY or JWT_PRIVATE_KEY_FILE, not both (the signing key is one of them)',
    );
  const otp = otpSettings(env, config.otp);
  // A pair given again inside the grace window carries the tokens of the rotation: still alive.
  const { refreshReuseGrace, refreshTokenTtl } = config.sessions;
  if (refreshReuseGrace >= Math.min(config.jwt.accessTokenTtl, refreshTokenTtl))
    throw new ConfigError(
      'Invalid configuration: REFRESH_REUSE_GRACE must be shorter than ACCESS_TOKEN_TTL and REFRESH_TOKEN_TTL',
    );
  // The session's key expires with its refresh token: an access token that outlived it would be
  // refused while a client, which refreshes by the access token's lifetime, holds it still valid.
  if (refreshTokenTtl < config.jwt.accessTokenTtl)
    throw new ConfigError(
      'Invalid configuration: REFRESH_TOKEN_TTL must not be shorter than ACCESS_TOKEN_TTL (a session ends when its refresh token expires)',
    );
  // A client sends the version back as the registration advertised it, and a client trims it: one
  // with blanks around it (a stray space in an env file) could never be accepted. A verifier
  // compares the issuer and audience of a token exactly.
  for (const [name, version] of [
    ['PRIVACY_POLICY_VERSION', config.policies.privacyPolicyVersion],
    ['TERMS_OF_USE_VERSION', config.policies.termsOfUseVersion],
    ['CONSENT_FORM_VERSION', config.policies.consentFormVersion],
    ['JWT_ISSUER', config.jwt.issuer],
    ['JWT_AUDIENCE', config.jwt.audience],
  ] as const)
    if (version !== undefined && version !== version.trim())
      throw new ConfigError(`Invalid configuration: ${name} must not begin or end with a blank`);
  checkDatabaseUrl(config.database.url);
  checkQueueSettings({
    redisUrl: config.redis.url,
    clusterNodes: config.redis.clusterNodes,
    prefix: config.mail.queuePrefix,
  });
  const { jobKey, ...mail } = config.mail;
  return Object.freeze({
    ...config,
    http: Object.freeze({
      ...config.http,
      trustProxy: parseTrustProxy(config.http.trustProxy),
      corsOrigins: Object.freeze(parseOrigins(config.http.corsOrigins)) as string[],
    }),
    mail: Object.freeze({
      ...mail,
      jobKeys: parseSetting(() => parseMailJobKeys(jobKey, env.APP_ENV === 'production')),
    }),
    otp,
    jwt: Object.freeze({
      ...config.jwt,
      privateKeyFile:
        config.jwt.privateKeyFile ?? path.join(os.homedir(), '.cache', 'tessera', 'dev-signing-key.pem'),
      // Only development's own key: a file named on purpose and missing is a mistake to report.
      createPrivateKeyFile: config.env !== 'production' && config.jwt.privateKeyFile === undefined,
    }),
    console: Object.freeze({ ...config.console, dir: config.console.dir ?? CONSOLE_BUILD }),
  });
}

/**
 * What an operator's command may read of the gateway's configuration besides its Redis: `queue` is
 * the mail queue's `BULLMQ_PREFIX` alone (not `MAIL_JOB_KEY`).
 */
export type OperatorSection = 'database' | 'otp' | 'queue' | 'rateLimit';

/** An operator's command's configuration: the gateway's settings of its logs and Redis, and of `S`. */
export type OperatorConfig<S extends OperatorSection = never> = Pick<
  GatewayConfig,
  'env' | 'log' | 'redis' | Exclude<S, 'queue'>
> &
  ('queue' extends S ? { mail: Pick<GatewayConfig['mail'], 'queuePrefix'> } : unknown);

/**
 * The configuration of an operator's command (`sessions:end`, `limits:lift`): the gateway's variables
 * of the sections it `reads`, checked as a gateway checks them, and no other. Of the secrets
 * production requires, only `OTP_SECRET`, for a command that reads `otp`: none needs the signing
 * key nor the mail job key.
 */
export function loadOperatorConfig<S extends OperatorSection>(
  env: NodeJS.ProcessEnv,
  reads: readonly S[],
): OperatorConfig<S> {
  const config: Partial<Env> & Pick<Env, 'env' | 'log' | 'redis'> = readConfig(operatorSchema(reads), env);
  checkRedisUrl(config.redis.url, config.redis.clusterNodes);
  if (config.database) checkDatabaseUrl(config.database.url);
  if (config.otp) requireInProduction(env, [['OTP_SECRET']]);
  if (config.mail)
    checkQueueSettings({
      redisUrl: config.redis.url,
      clusterNodes: config.redis.clusterNodes,
      prefix: config.mail.queuePrefix,
    });
  return Object.freeze({
    ...config,
    ...(config.otp && { otp: otpSettings(env, config.otp) }),
  }) as OperatorConfig<S>;
}

const operatorSchema = (reads: readonly OperatorSection[]) => {
  const sections = reads.filter((section) => section !== 'queue');
  const schema = Type.Pick(GatewayConfigSchema, ['env', 'log', 'redis', ...sections]);
  if (!reads.includes('queue')) return schema;
  const mail = Type.Pick(GatewayConfigSchema.properties.mail, ['queuePrefix']);
  return Type.Object({ ...schema.properties, mail });
};

/**
 * The variables of `env` that look like a misspelling (`misspelledVariables`) of a setting an
 * operator's command reads: ignored, they would have it act on other settings than the ones meant.
 */
export function misspelledOperatorVariables(env: NodeJS.ProcessEnv, reads: readonly OperatorSection[]) {
  const read = new Set(variablesOf(operatorSchema(reads)).map(({ name }) => name));
  return misspelledVariables(GatewayConfigSchema, env).filter(({ meant }) => read.has(meant));
}

/** The code settings, checked; OTP_SECRET defaults to the development secret, which production refuses. */
function otpSettings(env: NodeJS.ProcessEnv, otp: Env['otp']): GatewayConfig['otp'] {
  if (env.APP_ENV === 'production' && otp.secret?.trim() === DEVELOPMENT_OTP_SECRET)
    throw new ConfigError(
      "Invalid configuration: OTP_SECRET is the development secret, which Tessera's source publishes: generate one",
    );
  // Blanks are no secret (36 of them pass the length); a trailing newline of a secret file is fine.
  if (otp.secret !== undefined && otp.secret.replaceAll(/\s/g, '').length < 32)
    throw new ConfigError(
      'Invalid configuration: OTP_SECRET must hold at least 32 characters other than blanks',
    );
  // A code that expires before another may be asked for leaves its user with none to sign in with.
  if (otp.resendCooldown > otp.ttl)
    throw new ConfigError(
      'Invalid configuration: OTP_RESEND_COOLDOWN must not be longer than OTP_TTL (a user would wait for a new code with none valid)',
    );
  return Object.freeze({ ...otp, secret: otp.secret ?? DEVELOPMENT_OTP_SECRET });
}

/** As `pnpm db:migrate` reads it too. */
function checkDatabaseUrl(url: string): void {
  const problem = databaseUrlProblem(url);
  if (problem) throw new ConfigError(`Invalid configuration: ${problem}`);
}

function parseTrustProxy(setting: string): TrustProxy {
  // A CRLF .env file's `1\r` is the hop count 1.
  const value = setting.trim();
  if (value === 'true' || value === 'false' || value === '') return value === 'true';
  // A hop count: trust that many proxies in front of the gateway.
  if (/^\d+$/.test(value)) return (_address, hop) => hop < Number(value);
  const proxies = value.split(',').map((part) => part.trim());
  for (const proxy of proxies) {
    if (!isProxyAddress(proxy))
      throw new ConfigError(
        `Invalid configuration: TRUST_PROXY must be true, false, a hop count or proxy addresses/CIDRs (got "${proxy}")`,
      );
  }
  return proxies;
}

/** What Fastify's proxy-addr takes: a name of a range, an address, or one with a prefix length or netmask. */
function isProxyAddress(proxy: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(proxy)) return true;
  const [address = '', mask, ...rest] = proxy.split('/');
  const version = isIP(address);
  if (!version || rest.length > 0) return false;
  if (mask === undefined) return true;
  if (/^\d+$/.test(mask)) return Number(mask) <= (version === 4 ? 32 : 128);
  return isIP(mask) === version;
}

function parseOrigins(value: string): string[] {
  const origins = value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
  for (const origin of origins) {
    // Exactly as a browser sends it in Origin: scheme and host, lower case, no default port, no path.
    if (!/^https?:\/\/[^*]+$/.test(origin) || URL.parse(origin)?.origin !== origin)
      throw new ConfigError(
        `Invalid configuration: CORS_ORIGINS must list exact origins like https://app.example.com (got "${origin}")`,
      );
  }
  return origins;
}
