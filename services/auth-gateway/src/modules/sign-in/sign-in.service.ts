import { randomInt, randomUUID } from 'node:crypto';
import { AppError } from '@tessera/contracts';
import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import type { EnqueueOtpEmail } from '../../plugins/mail-queue.ts';
import type { ClientInfo, SessionsService } from '../sessions/sessions.service.ts';
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
  otpTtl: number;
  resendCooldown: number;
  /** Development and test only: the send-code response carries the code. */
  exposeCode: boolean;
  policies: PolicyVersions;
}

/** Email one-time-code sign-in: send a code, verify it, start a session. */
export function createSignInService(options: SignInServiceOptions) {
  const { db, otp, sessions, clock } = options;

  return {
    /** Answers the same whether or not an account exists for the email. */
    async sendCode(email: string) {
      const code = generateCode();
      const expiresAt = new Date(clock.now().getTime() + options.otpTtl * 1000);
      await otp.issue(email, code);
      await options.enqueueOtpEmail(randomUUID(), { to: email, code, expiresAt: expiresAt.toISOString() });
      return {
        email,
        expiresIn: options.otpTtl,
        resendIn: options.resendCooldown,
        ...(options.exposeCode ? { code } : {}),
      };
    },

    /** Checks the code; the first success for an email creates its user; every success starts a session. */
    async verifyCode(email: string, code: string, client: ClientInfo) {
      const outcome = await otp.verify(email, code);
      switch (outcome.result) {
        case 'missing':
          throw new AppError(404, 'OTP_NOT_FOUND', ['No active code for this email; request a new one']);
        case 'locked':
          throw new AppError(409, 'OTP_LOCKED', ['Too many wrong attempts; request a new code']);
        case 'wrong':
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
        return { ...tokens, user, isRegistrationComplete: isRegistrationComplete(user, options.policies) };
      } catch (error) {
        // The right code was consumed but no session came of it (Postgres down): give it back so
        // the user can retry with the same email instead of being told the code is gone.
        await otp.issue(email, code).catch(() => undefined);
        throw error;
      }
    },
  };
}
