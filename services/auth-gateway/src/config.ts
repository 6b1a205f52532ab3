import os from 'node:os';
import path from 'node:path';
import { AppEnv, LogLevel, readEnv, requireInProduction } from '@tessera/config';
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

  JWT_ISSUER: Type.String({ default: 'tessera' }),
  JWT_AUDIENCE: Type.String({ default: 'tessera' }),
  /** PEM private key (EdDSA/Ed25519 or ES256) used to sign access tokens. */
  JWT_PRIVATE_KEY: Type.Optional(Type.String()),
  /** File holding that PEM key instead; in development it is generated on first start. */
  JWT_PRIVATE_KEY_FILE: Type.Optional(Type.String()),
  ACCESS_TOKEN_TTL: Seconds(3600),
  REFRESH_TOKEN_TTL: Seconds(2_592_000),
  REFRESH_REUSE_GRACE: Type.Integer({ minimum: 0, default: 10 }),

  /** Server secret of the keyed code hash: HMAC(OTP_SECRET, email + code). */
  OTP_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  OTP_TTL: Seconds(300),
  OTP_MAX_ATTEMPTS: Type.Integer({ minimum: 1, default: 5 }),
  OTP_RESEND_COOLDOWN: Type.Integer({ minimum: 0, default: 60 }),

  PRIVACY_POLICY_VERSION: Type.String({ default: '1.0.0' }),
  TERMS_OF_USE_VERSION: Type.String({ default: '1.0.0' }),
});

type Env = Static<typeof ConfigSchema>;

const DEVELOPMENT_OTP_SECRET = 'tessera-development-otp-secret-not-for-production';

export type GatewayConfig = Readonly<
  Omit<Env, 'TRUST_PROXY' | 'OTP_SECRET' | 'JWT_PRIVATE_KEY_FILE'> & {
    TRUST_PROXY: ReturnType<typeof parseTrustProxy>;
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
