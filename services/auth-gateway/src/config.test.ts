import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.ts';

describe('loadConfig', () => {
  it('runs development with no variables set, on the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      APP_ENV: 'development',
      PORT: 3000,
      DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/tessera',
      REDIS_URL: 'redis://127.0.0.1:6379',
      ACCESS_TOKEN_TTL: 3600,
      REFRESH_TOKEN_TTL: 2_592_000,
      REFRESH_REUSE_GRACE: 10,
      OTP_TTL: 300,
      OTP_MAX_ATTEMPTS: 5,
      OTP_RESEND_COOLDOWN: 60,
      OTP_MAX_SENDS_PER_EMAIL_PER_HOUR: 5,
      OTP_MAX_SENDS_PER_IP_PER_HOUR: 30,
      OTP_MAX_FAILURES_PER_EMAIL_PER_DAY: 20,
      OTP_MAX_FAILURES_PER_IP_PER_HOUR: 50,
      RATE_LIMIT_MAX: 600,
      RATE_LIMIT_WINDOW: 60,
      JWT_CLOCK_TOLERANCE: 30,
      CORS_ORIGINS: [],
      TRUST_PROXY: false,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('fails with one line naming a malformed variable', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrowError(
      /^Invalid configuration: PORT must be integer$/,
    );
    expect(() => loadConfig({ APP_ENV: 'staging' })).toThrowError(/APP_ENV/);
  });

  it('refuses production without signing keys or the OTP secret', () => {
    expect(() => loadConfig({ APP_ENV: 'production', OTP_SECRET: 'x'.repeat(32) })).toThrowError(
      'Invalid configuration: JWT_PRIVATE_KEY or JWT_PRIVATE_KEY_FILE is required when APP_ENV=production',
    );
    expect(() => loadConfig({ APP_ENV: 'production', JWT_PRIVATE_KEY_FILE: '/keys/k.pem' })).toThrowError(
      'Invalid configuration: OTP_SECRET is required when APP_ENV=production',
    );
    expect(() =>
      loadConfig({ APP_ENV: 'production', JWT_PRIVATE_KEY_FILE: '/k', OTP_SECRET: 'short' }),
    ).toThrowError(/OTP_SECRET must NOT have fewer than 32 characters/);
    expect(
      loadConfig({ APP_ENV: 'production', JWT_PRIVATE_KEY_FILE: '/k', OTP_SECRET: 'x'.repeat(32) }).APP_ENV,
    ).toBe('production');
  });

  it('reads TRUST_PROXY as a flag, a hop count or a list of proxies', () => {
    expect(loadConfig({ TRUST_PROXY: 'true' }).TRUST_PROXY).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).TRUST_PROXY).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
    ]);
    const hops = loadConfig({ TRUST_PROXY: '1' }).TRUST_PROXY as (address: string, hop: number) => boolean;
    expect([hops('x', 0), hops('x', 1)]).toEqual([true, false]);
  });
});
