import { type Static, Type } from 'typebox';

/** BullMQ queue that carries email jobs from the gateway to the mailer. */
export const EMAIL_QUEUE = 'email';

/** Job name of a one-time-code email. */
export const SEND_OTP_JOB = 'send-otp';

export const SendOtpJobData = Type.Object({
  to: Type.String({ description: 'Normalized recipient address' }),
  code: Type.String({ pattern: '^[0-9]{4}$' }),
  expiresAt: Type.String({ format: 'date-time', description: 'When the code stops working' }),
  locale: Type.Optional(Type.String()),
});
export type SendOtpJobData = Static<typeof SendOtpJobData>;

/** Deterministic per issued code, so a retried enqueue never sends twice. */
export function sendOtpJobId(codeId: string): string {
  return `otp-${codeId}`;
}

/** What the code is replaced with once a job has failed for good, so retained jobs hold no secret. */
export const REDACTED_CODE = '****';

/** Delivery policy of a send-otp job, set by the producer as BullMQ requires. */
export const SEND_OTP_JOB_OPTIONS = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 1000 },
  // A delivered job holds a code: drop it at once. Failed jobs stay a week for inspection (code redacted).
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3600 },
} as const;
