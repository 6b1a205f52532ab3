import { randomInt, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.ts';
import { type ErrorCode, GatewayError } from '../../errors.ts';
import type { Refusal } from '../limits/sliding-window.ts';
import type { ClientInfo, SecurityEvent, SecurityLog } from '../security-events/security-events.ts';
import type { Sessions } from '../sessions/sessions.ts';
import { type CurrentPolicies, registrationStatus } from '../users/profile.ts';
import { type Signup, upsertOnSignIn } from '../users/users.repository.ts';
import { mailboxOf } from './email-address.ts';
import { codesSent, verifications } from './metrics.ts';
import type { OtpStore } from './otp.store.ts';
import type { EnqueueOtpEmail } from './otp-email.queue.ts';

/** A uniformly random 4-digit code from the CSPRNG, leading zeros kept. */
export function generateCode(): string {
  return randomInt(0, 10_000).toString().padStart(4, '0');
}

export interface SignInServiceOptions {
  otp: OtpStore;
  enqueueOtpEmail: EnqueueOtpEmail;
  startSession: Sessions['start'];
  /** Erases the account of an email if its deletion is due (account deletion's `finalizeDue`). */
  finalizeDueDeletion: (email: string) => Promise<unknown>;
  securityLog: SecurityLog;
  clock: Clock;
  log: FastifyBaseLogger;
  otpTtl: number;
  resendCooldown: number;
  /** Development and test only: the send-code response carries the code. */
  exposeCode: boolean;
  policies: CurrentPolicies;
}

const REFUSALS: Record<string, ErrorCode> = {
  'send:cooldown': 'SEND_COOLDOWN',
  'send:email': 'SEND_LIMIT_EMAIL',
  'send:ip': 'SEND_LIMIT_IP',
  'send:failures': 'VERIFY_LIMIT_EMAIL',
  'verify:email': 'VERIFY_LIMIT_EMAIL',
  'verify:ip': 'VERIFY_LIMIT_IP',
};

export type SignInService = ReturnType<typeof createSignInService>;

/** Email one-time-code sign-in: send a code, verify it, start a session. */
export function createSignInService(options: SignInServiceOptions) {
  const { otp, clock, log } = options;

  // A refusal or a lock-out stands even when its record cannot be written.
  const record = (event: Omit<SecurityEvent, 'at'>) =>
    options.securityLog.recordAfter({ ...event, at: clock.now() });

  /** 429 with the true wait; the first refusal of a full window is a security event. */
  async function refuse(
    limit: 'send' | 'verify',
    refusal: Refusal,
    email: string,
    client: ClientInfo,
  ): Promise<never> {
    // An address's limit is not the requested email's account's business.
    const account = refusal.window === 'ip' ? {} : { email };
    if (refusal.first)
      await record({
        type: 'rate_limited',
        ...account,
        client,
        details: { limit: `${limit}:${refusal.window}` },
      });
    const code = REFUSALS[`${limit}:${refusal.window}`] ?? 'RATE_LIMITED';
    throw new GatewayError(code, [`Try again in ${refusal.retryAfter} seconds`], refusal.retryAfter);
  }

  /**
   * A session of `email`'s account. An account whose deletion is due is erased first, as its sweep
   * would, and the address gets a new one: signing in cannot keep it or its data after its date.
   */
  async function startSession(email: string, client: ClientInfo, signup: Signup) {
    const start = () => options.startSession(client, upsertOnSignIn(email, clock.now(), signup));
    const started = await start();
    if (started) return started;
    await options.finalizeDueDeletion(email);
    const renewed = await start();
    if (!renewed) throw new Error('an account whose deletion is due is still there after its erasure');
    return renewed;
  }

  return {
    /** Answers the same whether or not an account exists for the email. */
    async sendCode(email: string, client: ClientInfo) {
      const code = generateCode();
      const expiresAt = new Date(clock.now().getTime() + options.otpTtl * 1000);
      const mailbox = mailboxOf(email);
      const issued = await otp.issue({ email, mailbox }, code, client.ipAddress);
      // The inbox's budget is its owner's: the event goes to the account of the inbox's own address.
      if (issued.refusal)
        return refuse('send', issued.refusal, issued.refusal.window === 'email' ? mailbox : email, client);
      try {
        await options.enqueueOtpEmail(randomUUID(), { to: email, code, expiresAt: expiresAt.toISOString() });
      } catch (error) {
        // Nothing was sent: the client must not be told to wait for an email that will never come.
        await issued.withdraw().catch(() => undefined);
        throw error;
      }
      codesSent.add(1);
      return {
        email,
        expiresIn: options.otpTtl,
        // The cooldown, or longer when this code has just filled the inbox's or the client's hourly budget.
        resendIn: Math.max(options.resendCooldown, issued.nextAfter),
        ...(options.exposeCode ? { code } : {}),
      };
    },

    /** Checks the code; the first success for an email creates its user; every success starts a session. */
    async verifyCode(email: string, code: string, client: ClientInfo, signup: Signup = {}) {
      const outcome = await otp.verify(email, code, client.ipAddress);
      if (outcome.result !== 'ok')
        verifications.add(1, { result: outcome.result === 'missing' ? 'expired' : outcome.result });
      switch (outcome.result) {
        case 'limited':
          return refuse('verify', outcome.refusal, email, client);
        case 'missing':
          throw new GatewayError('OTP_NOT_FOUND');
        case 'locked':
          throw new GatewayError('OTP_LOCKED');
        case 'wrong':
          await record({
            type: 'sign_in_failed',
            email,
            client,
            details: { attemptsLeft: outcome.attemptsLeft },
          });
          // Each warning names the account its event was recorded under (scope ip: none), never the address.
          await Promise.all(
            outcome.lockedOut.map(async (scope) => {
              const userId = await record({
                type: 'code_locked',
                ...(scope === 'ip' ? {} : { email }),
                client,
                details: { scope },
              });
              log.warn(
                { scope, ip: client.ipAddress, ...(userId && { userId }) },
                'sign-in locked out after too many wrong codes',
              );
            }),
          );
          throw new GatewayError('OTP_INVALID', [
            outcome.emailRetryAfter !== undefined
              ? `Too many wrong codes for this email: no code is accepted for ${outcome.emailRetryAfter} seconds`
              : outcome.attemptsLeft > 0
                ? `${outcome.attemptsLeft} attempt(s) left for this code`
                : 'The code is now locked; request a new one',
          ]);
      }
      try {
        const { user, tokens } = await startSession(email, client, signup);
        verifications.add(1, { result: 'ok' });
        return {
          tokens,
          user,
          isRegistrationComplete: registrationStatus(user, options.policies).isRegistrationComplete,
        };
      } catch (error) {
        // The right code was consumed but no session came of it (Postgres down): give it back so
        // the user can retry with the same email instead of being told the code is gone.
        await otp.reinstate(email, code, outcome.accepted).catch(() => undefined);
        throw error;
      }
    },
  };
}
