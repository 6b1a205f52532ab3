import type { RedisClient } from '@tessera/redis';
import type { Queue } from 'bullmq';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from './clock.ts';
import type { GatewayConfig } from './config.ts';
import type { Database, PostgresState } from './database.ts';
import type { SchemaState } from './migration-state.ts';
import { createAccountDeletion } from './modules/account-deletion/account-deletion.service.ts';
import { createEmailQueue } from './modules/email/email.queue.ts';
import { readinessChecks } from './modules/health/readiness.ts';
import { retentionBatches, warnIfShortRetention } from './modules/housekeeping/retention.ts';
import { createSweep } from './modules/housekeeping/sweep.ts';
import { createSecurityLog } from './modules/security-events/security-events.ts';
import { createActiveSessionStore } from './modules/sessions/active-sessions.store.ts';
import { verifyCaller } from './modules/sessions/authenticate.ts';
import { createSessions } from './modules/sessions/sessions.ts';
import { createOtpStore } from './modules/sign-in/otp.store.ts';
import { otpEmailQueue } from './modules/sign-in/otp-email.queue.ts';
import { OTP_SECRET_CHECK_INTERVAL, otpSecretCheck } from './modules/sign-in/otp-secret-check.ts';
import { createSignInService } from './modules/sign-in/sign-in.service.ts';
import type { SigningKey, VerificationKey } from './modules/tokens/keys.ts';
import { successorSealer } from './modules/tokens/refresh-token.ts';
import { createTokenService } from './modules/tokens/tokens.service.ts';
import { createUsers } from './modules/users/users.service.ts';

export interface Clients {
  db: Kysely<Database>;
  /** Whether Postgres has every migration of this code: readiness and the sweeps wait for it. */
  schema: SchemaState;
  /** Whether Postgres answers, on a connection of its own (readiness). */
  postgresAnswers: () => Promise<PostgresState>;
  redis: RedisClient;
  mailQueue: Queue;
  /** The mail queue's own Redis connection. */
  queueRedis: RedisClient;
  keys: { signingKey: SigningKey; verificationKeys: VerificationKey[] };
  clock: Clock;
  log: FastifyBaseLogger;
}

export type Services = ReturnType<typeof createServices>;

/** The whole gateway: every service and store, built once from the configuration and the clients. */
export function createServices(
  config: GatewayConfig,
  { db, schema, postgresAnswers, redis, mailQueue, queueRedis, keys, clock, log }: Clients,
) {
  const securityLog = createSecurityLog(db, log);
  const policies = { ...config.policies, consentFormVersion: config.policies.consentFormVersion ?? null };
  const tokens = createTokenService({
    ...keys,
    issuer: config.jwt.issuer,
    audience: config.jwt.audience,
    accessTokenTtl: config.jwt.accessTokenTtl,
    clockTolerance: config.jwt.clockTolerance,
    clock,
  });
  const activeSessions = createActiveSessionStore(redis);
  const emails = createEmailQueue(mailQueue, queueRedis, config.mail.queuePrefix, log);
  const sessions = createSessions({
    db,
    activeSessions,
    tokens,
    securityLog,
    clock,
    log,
    accessTokenTtl: config.jwt.accessTokenTtl,
    refreshTokenTtl: config.sessions.refreshTokenTtl,
    refreshReuseGrace: config.sessions.refreshReuseGrace,
    successors: successorSealer(config.otp.secret),
  });
  const accountDeletion = createAccountDeletion({
    db,
    activeSessions,
    emails,
    securityLog,
    clock,
    log,
    grace: config.users.deletionGrace,
    requestCooldown: config.users.deletionRequestCooldown,
  });
  const otp = createOtpStore(redis, config.otp);
  const signIn = createSignInService({
    otp,
    enqueueOtpEmail: otpEmailQueue(emails, config.mail.jobKeys, {
      ttl: config.otp.ttl,
      seriesOf: otp.seriesOf,
    }),
    startSession: sessions.start,
    finalizeDueDeletion: (email) => accountDeletion.finalizeDue(1, email),
    securityLog,
    clock,
    log,
    otpTtl: config.otp.ttl,
    resendCooldown: config.otp.resendCooldown,
    exposeCode: config.env !== 'production',
    policies,
  });
  const users = createUsers({
    db,
    securityLog,
    clock,
    policies,
    minAge: config.users.minAge,
    usernameChangeCooldown: config.users.usernameChangeCooldown,
  });

  warnIfShortRetention({ securityEventRetention: config.retention.securityEventRetention, log });
  const checkOtpSecrets = otpSecretCheck(otp, log);
  return {
    /** Who is calling: the access token verified and its session still active. */
    authenticate: verifyCaller(tokens, activeSessions, { db, clock }),
    jwks: tokens.jwks,
    signIn,
    sessions,
    users,
    accountDeletion,
    /** Background work every gateway process runs while it is up. */
    sweeps: [
      createSweep({
        name: 'account_deletion',
        batches: () => async (limit) => (await accountDeletion.finalizeDue(limit)).length,
        interval: config.users.deletionSweepInterval,
        log,
        ready: schema.isCurrent,
      }),
      createSweep({
        name: 'retention',
        batches: () => retentionBatches({ db, clock, log, ...config.retention }),
        interval: config.retention.sweepInterval,
        log,
        ready: schema.isCurrent,
      }),
      createSweep({
        name: 'otp_secret_check',
        batches: () => async () => {
          await checkOtpSecrets();
          return 0;
        },
        interval: OTP_SECRET_CHECK_INTERVAL,
        log,
      }),
    ],
    securityLog,
    readiness: readinessChecks(postgresAnswers, [redis, queueRedis], schema),
  };
}
