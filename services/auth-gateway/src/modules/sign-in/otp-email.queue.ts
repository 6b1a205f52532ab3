import { SEND_OTP_JOB, type SendOtpJobData, sendOtpJobId } from '@tessera/contracts';
import type { EmailQueue } from '../email/email.queue.ts';

/** Hands a one-time-code email to the mailer; resolves once the job is stored in Redis. */
export type EnqueueOtpEmail = (codeId: string, data: SendOtpJobData) => Promise<void>;

/** The `send-otp` job of the email contract, one per issued code. */
export function otpEmailQueue(emails: EmailQueue): EnqueueOtpEmail {
  return (codeId, data) => emails.add(SEND_OTP_JOB, data, sendOtpJobId(codeId));
}
