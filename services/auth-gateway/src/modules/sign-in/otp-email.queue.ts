import { type MailJobKeys, SEND_OTP_JOB, sealCode, sendOtpJobId } from '@tessera/contracts';
import type { EmailQueue } from '../email/email.queue.ts';

/** A code email to send: the code in clear, sealed before it reaches Redis. */
export interface OtpEmail {
  to: string;
  code: string;
  expiresAt: string;
}

/** Hands a one-time-code email to the mailer; resolves once the job is stored in Redis. */
export type EnqueueOtpEmail = (codeId: string, email: OtpEmail) => Promise<void>;

/**
 * The `send-otp` job of the email contract, one per issued code, its code sealed with `MAIL_JOB_KEY`,
 * and its address's series of codes (of which only the newest is sent) named by `seriesOf`, the OTP
 * store's keyed hash. `ttl` (seconds) is how long a code lives.
 */
export function otpEmailQueue(
  emails: EmailQueue,
  keys: MailJobKeys,
  { ttl, seriesOf }: { ttl: number; seriesOf: (to: string) => string },
): EnqueueOtpEmail {
  return (codeId, { to, code, expiresAt }) =>
    emails.add(
      SEND_OTP_JOB,
      { to, sealedCode: sealCode(code, to, keys), expiresAt, series: seriesOf(to) },
      sendOtpJobId(codeId),
      ttl * 1000,
    );
}
