import os from 'node:os';
import path from 'node:path';
import { AppEnv, ConfigError, LogLevel, readEnv, requireInProduction } from '@tessera/config';
import { SEND_OTP_JOB_OPTIONS } from '@tessera/contracts';
import { type Static, Type } from 'typebox';

const Seconds = (defaultValue: number) => Type.Integer({ minimum: 1, default: defaultValue });

const ConfigSchema = Type.Object({
  APP_ENV: AppEnv,
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ default: '0.0.0.0' }),
  LOG_LEVEL: LogLevel,
  /** Fastify `trustProxy`: `true`, a hop count, or a comma-separated list of proxy addresses/CIDRs. */
  TRUST_PROXY: Type.String({ default: 'false' }),
  DATABASE_URL: Type.String({ default: 'postgres://postgres@127.0.0.1:5432/tessera' }),
  REDIS_URL: Type.String({ default: 'redis://127.0.0.1:6379' }),
  /** Prefix of every key the gateway writes to Redis (codes, sessions). */
  REDIS_KEY_PREFIX: Type.String({ default: 'tessera:' }),
  BULLMQ_PREFIX: Type.String({ default: 'bull' }),
  /** Retry policy of a code email, fixed when the job is queued: attempts, and the first backoff (doubling). */
  MAIL_RETRY_ATTEMPTS: Type.Integer({ minimum: 1, maximum: 20, default: SEND_OTP_JOB_OPTIONS.attempts }),
  MAIL_RETRY_BACKOFF_MS: Type.Integer({ minimum: 0, default: SEND_OTP_JOB_OPTIONS.backoff.delay }),

  JWT_ISSUER: Type.String({ default: 'tessera' }),
  JWT_AUDIENCE: Type.String({ default: 'tessera' }),
  /** PEM private key (EdDSA/Ed25519 or ES256) used to sign access tokens. */
  JWT_PRIVATE_KEY: Type.Optional(Type.String()),
  /** File holding that PEM key instead; in development it is generated on first start. */
  JWT_PRIVATE_KEY_FILE: Type.Optional(Type.String()),
  /** Keys that still verify (and are listed in the JWKS) but no longer sign: PEM text, several blocks allowed. */
  JWT_VERIFY_KEYS: Type.Optional(Type.String()),
  /** The same as files: a comma-separated list of PEM files (private or public keys). */
  JWT_VERIFY_KEY_FILES: Type.Optional(Type.String()),
  /** Seconds of clock difference forgiven when checking an access token's `exp`/`nbf`. */
  JWT_CLOCK_TOLERANCE: Type.Integer({ minimum: 0, maximum: 300, default: 30 }),
  ACCESS_TOKEN_TTL: Seconds(3600),
  REFRESH_TOKEN_TTL: Seconds(2_592_000),
  REFRESH_REUSE_GRACE: Type.Integer({ minimum: 0, default: 10 }),

  /** Server secret of the keyed code hash: HMAC(OTP_SECRET, email + code). */
  OTP_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  OTP_TTL: Seconds(300),
  OTP_MAX_ATTEMPTS: Type.Integer({ minimum: 1, default: 5 }),
  OTP_RESEND_COOLDOWN: Type.Integer({ minimum: 0, default: 60 }),
  OTP_MAX_SENDS_PER_EMAIL_PER_HOUR: Type.Integer({ minimum: 1, default: 5 }),
  OTP_MAX_SENDS_PER_IP_PER_HOUR: Type.Integer({ minimum: 1, default: 30 }),
  OTP_MAX_FAILURES_PER_EMAIL_PER_DAY: Type.Integer({ minimum: 1, default: 20 }),
  OTP_MAX_FAILURES_PER_IP_PER_HOUR: Type.Integer({ minimum: 1, default: 50 }),
  /** The general limit: requests per client IP per RATE_LIMIT_WINDOW seconds, on every route but health. */
  RATE_LIMIT_MAX: Type.Integer({ minimum: 1, default: 600 }),
  RATE_LIMIT_WINDOW: Seconds(60),

  /** Browser origins allowed to call the API (CORS), comma-separated and exact; empty allows none. */
  CORS_ORIGINS: Type.String({ default: '' }),

  PRIVACY_POLICY_VERSION: Type.String({ default: '1.0.0' }),
  TERMS_OF_USE_VERSION: Type.String({ default: '1.0.0' }),
});

type Env = Static<typeof ConfigSchema>;

const DEVELOPMENT_OTP_SECRET = 'tessera-development-otp-secret-not-for-production';

export type GatewayConfig = Readonly<
  Omit<Env, 'TRUST_PROXY' | 'OTP_SECRET' | 'JWT_PRIVATE_KEY_FILE' | 'CORS_ORIGINS'> & {
    TRUST_PROXY: ReturnType<typeof parseTrustProxy>;
    CORS_ORIGINS: string[];
    OTP_SECRET: string;
    JWT_PRIVATE_KEY_FILE: string;
  }
>;

/** Reads, validates and freezes the gateway configuration; throws one line naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const parsed = readEnv(ConfigSchema, env);
  requireInProduction(parsed, [['JWT_PRIVATE_KEY', 'JWT_PRIVATE_KEY_FILE'], ['OTP_SECRET']]);
  return Object.freeze({
    ...parsed,
    TRUST_PROXY: parseTrustProxy(parsed.TRUST_PROXY),
    CORS_ORIGINS: parseOrigins(parsed.CORS_ORIGINS),
    OTP_SECRET: parsed.OTP_SECRET ?? DEVELOPMENT_OTP_SECRET,
    JWT_PRIVATE_KEY_FILE:
      parsed.JWT_PRIVATE_KEY_FILE ?? path.join(os.homedir(), '.cache', 'tessera', 'dev-signing-key.pem'),
  });
}

function parseTrustProxy(value: string): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (value === 'true' || value === 'false') return value === 'true';
  // A hop count: trust that many proxies in front of the gateway.
  if (/^\d+$/.test(value)) return (_address, hop) => hop < Number(value);
  return value.split(',').map((part) => part.trim());
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
