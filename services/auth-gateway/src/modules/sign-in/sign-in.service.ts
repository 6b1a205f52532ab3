import { randomInt, randomUUID } from 'node:crypto';
import { AppError } from '@tessera/contracts';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import { codesSent, verifications } from '../../metrics.ts';
import type { EnqueueOtpEmail } from '../../plugins/mail-queue.ts';
import type { Refusal } from '../limits/sliding-window.ts';
import {
  type ClientInfo,
  recordSecurityEventSafely,
  type SecurityEvent,
} from '../security-events/security-events.ts';
import type { SessionsService } from '../sessions/sessions.service.ts';
import { isRegistrationComplete, type PolicyVersions, toUser } from '../users/user.ts';
import { upsertOnSignIn } from '../users/users.repository.ts';
import type { OtpStore } from './otp.store.ts';

/** Emails are trimmed and lower-cased before any use: `Alice@Example.com ` is `alice@example.com`. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** A uniformly random 4-digit code from the CSPRNG, leading zeros kept. */
export function generateCode(): string {
  return randomInt(0, 10_000).toString().padStart(4, '0');
}

export interface SignInServiceOptions {
  db: Kysely<Database>;
  otp: OtpStore;
  enqueueOtpEmail: EnqueueOtpEmail;
  sessions: SessionsService;
  clock: Clock;
  log: FastifyBaseLogger;
  otpTtl: number;
  resendCooldown: number;
  /** Development and test only: the send-code response carries the code. */
  exposeCode: boolean;
  policies: PolicyVersions;
}

const REFUSALS: Record<string, string> = {
  'send:cooldown': 'A code was sent to this email moments ago',
  'send:email': 'Too many codes were requested for this email',
  'send:ip': 'Too many codes were requested from this address',
  'verify:email': 'Too many wrong codes for this email',
  'verify:ip': 'Too many wrong codes from this address',
};

/** Email one-time-code sign-in: send a code, verify it, start a session. */
export function createSignInService(options: SignInServiceOptions) {
  const { db, otp, sessions, clock, log } = options;

  // A refusal or a lock-out stands even when its record cannot be written.
  const record = (event: Omit<SecurityEvent, 'at'>) =>
    recordSecurityEventSafely(db, log, { ...event, at: clock.now() });

  /** 429 with the true wait; the first refusal of a full window is a security event. */
  async function refuse(limit: string, refusal: Refusal, email: string, client: ClientInfo): Promise<never> {
    // An address's limit is not the requested email's account's business.
    const account = refusal.window === 'ip' ? {} : { email };
    if (refusal.first)
      await record({
        type: 'rate_limit',
        ...account,
        client,
        details: { limit: `${limit}:${refusal.window}` },
      });
    throw new AppError(
      429,
      'RATE_LIMITED',
      [
        REFUSALS[`${limit}:${refusal.window}`] ?? 'Too many attempts',
        `Try again in ${refusal.retryAfter} seconds`,
      ],
      refusal.retryAfter,
    );
  }

  return {
    /** Answers the same whether or not an account exists for the email. */
    async sendCode(email: string, client: ClientInfo) {
      const code = generateCode();
      const expiresAt = new Date(clock.now().getTime() + options.otpTtl * 1000);
      const refusal = await otp.issue(email, code, client.ipAddress);
      if (refusal) return refuse('send', refusal, email, client);
      await options.enqueueOtpEmail(randomUUID(), { to: email, code, expiresAt: expiresAt.toISOString() });
      codesSent.add(1);
      return {
        email,
        expiresIn: options.otpTtl,
        resendIn: options.resendCooldown,
        ...(options.exposeCode ? { code } : {}),
      };
    },

    /** Checks the code; the first success for an email creates its user; every success starts a session. */
    async verifyCode(email: string, code: string, client: ClientInfo) {
      const outcome = await otp.verify(email, code, client.ipAddress);
      if (outcome.result !== 'ok')
        verifications.add(1, { result: outcome.result === 'missing' ? 'expired' : outcome.result });
      switch (outcome.result) {
        case 'limited':
          return refuse('verify', outcome.refusal, email, client);
        case 'missing':
          throw new AppError(404, 'OTP_NOT_FOUND', ['No active code for this email; request a new one']);
        case 'locked':
          throw new AppError(409, 'OTP_LOCKED', ['Too many wrong attempts; request a new code']);
        case 'wrong':
          for (const scope of outcome.lockedOut) {
            log.warn({ scope, ip: client.ipAddress }, 'sign-in locked out after too many wrong codes');
            await record({
              type: 'lockout',
              ...(scope === 'ip' ? {} : { email }),
              client,
              details: { scope },
            });
          }
          throw new AppError(400, 'OTP_INVALID', [
            'Invalid code',
            outcome.attemptsLeft > 0
              ? `${outcome.attemptsLeft} attempt(s) left for this code`
              : 'The code is now locked; request a new one',
          ]);
      }
      try {
        const user = toUser(await upsertOnSignIn(db, email, clock.now()));
        const tokens = await sessions.start({ id: user._id, roles: user.roles }, client);
        verifications.add(1, { result: 'ok' });
        return { ...tokens, user, isRegistrationComplete: isRegistrationComplete(user, options.policies) };
      } catch (error) {
        // The right code was consumed but no session came of it (Postgres down): give it back so
        // the user can retry with the same email instead of being told the code is gone.
        await otp.reinstate(email, code).catch(() => undefined);
        throw error;
      }
    },
  };
}
