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

/** Delivery policy of every email job, set by the producer as BullMQ requires. */
export const EMAIL_JOB_OPTIONS = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 1000 },
  // A delivered job holds a code or an address: drop it at once. Failed jobs stay a week for
  // inspection (a code redacted).
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3600 },
} as const;

/** The send-otp job's delivery policy: that of every email job. */
export const SEND_OTP_JOB_OPTIONS = EMAIL_JOB_OPTIONS;

/** Job name of the email telling a user their account will be deleted, and how to keep it. */
export const DELETION_SCHEDULED_JOB = 'deletion-scheduled';

export const DeletionScheduledJobData = Type.Object({
  to: Type.String({ description: 'Normalized recipient address' }),
  scheduledFor: Type.String({ format: 'date-time', description: 'When the account will be deleted' }),
  locale: Type.Optional(Type.String()),
});
export type DeletionScheduledJobData = Static<typeof DeletionScheduledJobData>;

/** Job name of the email confirming that a scheduled deletion was cancelled. */
export const DELETION_CANCELLED_JOB = 'deletion-cancelled';

export const DeletionCancelledJobData = Type.Object({
  to: Type.String({ description: 'Normalized recipient address' }),
  cancelledAt: Type.String({ format: 'date-time', description: 'When the deletion was cancelled' }),
  locale: Type.Optional(Type.String()),
});
export type DeletionCancelledJobData = Static<typeof DeletionCancelledJobData>;

/** Deterministic per request (a user requests a deletion once at a time), so a retried enqueue never sends twice. */
export function deletionScheduledJobId(userId: string, requestedAt: Date): string {
  return `deletion-scheduled-${userId}-${requestedAt.getTime()}`;
}

/** Deterministic per cancellation. */
export function deletionCancelledJobId(userId: string, cancelledAt: Date): string {
  return `deletion-cancelled-${userId}-${cancelledAt.getTime()}`;
}

/** Every job of the `email` queue by name, with the data it carries. */
export interface EmailJobs {
  [SEND_OTP_JOB]: SendOtpJobData;
  [DELETION_SCHEDULED_JOB]: DeletionScheduledJobData;
  [DELETION_CANCELLED_JOB]: DeletionCancelledJobData;
}
export type EmailJobName = keyof EmailJobs;

/** The schema of each job's data, which the mailer checks before it sends. */
export const EMAIL_JOB_DATA = {
  [SEND_OTP_JOB]: SendOtpJobData,
  [DELETION_SCHEDULED_JOB]: DeletionScheduledJobData,
  [DELETION_CANCELLED_JOB]: DeletionCancelledJobData,
} as const;
