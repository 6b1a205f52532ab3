import { type Static, Type } from 'typebox';

/** BullMQ queue that carries email jobs from the gateway to the mailer. */
export const EMAIL_QUEUE = 'email';

/** Job name of a one-time-code email. */
export const SEND_OTP_JOB = 'send-otp';

/**
 * One address, as the gateway normalizes it: never a list, a group or a display name, which the
 * mailer's MIME composer would read as several recipients, or as words beside the address (a job
 * written into Redis by someone else reaches one recipient at most, with the product's own words);
 * no control character, which nodemailer would drop, sending to another address.
 */
const Recipient = Type.String({
  maxLength: 254,
  pattern:
    '^[^\\s\\x00-\\x1f\\x7f-\\x9f@<>",;:()\\[\\]\\\\]+@[^\\s\\x00-\\x1f\\x7f-\\x9f@<>",;:()\\[\\]\\\\]+$',
  description: 'Normalized recipient address',
});

export const SendOtpJobData = Type.Object({
  to: Recipient,
  sealedCode: Type.String({
    description: 'The code sealed with MAIL_JOB_KEY (sealed-code.ts), so Redis never holds it in clear',
  }),
  expiresAt: Type.String({ format: 'date-time', description: 'When the code stops working' }),
  series: Type.Optional(
    Type.String({
      pattern: '^[0-9a-f]{64}$',
      description:
        "The address's codes as one series, where only the newest is sent (codesKey): an HMAC of the address under the gateway's OTP_SECRET",
    }),
  ),
  locale: Type.Optional(Type.String()),
});
export type SendOtpJobData = Static<typeof SendOtpJobData>;

/** Deterministic per issued code, so a retried enqueue never sends twice. */
export function sendOtpJobId(codeId: string): string {
  return `otp-${codeId}`;
}

/** What the sealed code is replaced with once a job has ended undelivered, so retained jobs hold no secret. */
export const REDACTED_CODE = '****';

/** The mailer's backoff strategy (its worker's `settings.backoffStrategy`): capped exponential. */
export const EMAIL_BACKOFF = 'capped-exponential';

/**
 * Delivery policy of every email job, set by the producer as BullMQ requires. Retries end at the
 * job's deadline (the code's expiry; a day for account notices), which the mailer enforces; the
 * attempt count is only a backstop.
 */
export const EMAIL_JOB_OPTIONS = {
  attempts: 100_000,
  backoff: { type: EMAIL_BACKOFF },
  // A delivered job holds an address (and a sealed code): drop it at once. Jobs that end undelivered
  // stay a week for inspection (a code redacted), the newest 10,000 of them, each with the stack of
  // its last attempt only: a flood of sends to addresses that bounce cannot fill Redis with them.
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
  stackTraceLimit: 1,
} as const;

/** Job name of the email telling a user their account will be deleted, and how to keep it. */
export const DELETION_SCHEDULED_JOB = 'deletion-scheduled';

export const DeletionScheduledJobData = Type.Object({
  to: Recipient,
  scheduledFor: Type.String({ format: 'date-time', description: 'When the account will be deleted' }),
  locale: Type.Optional(Type.String()),
});
export type DeletionScheduledJobData = Static<typeof DeletionScheduledJobData>;

/** Job name of the email confirming that a scheduled deletion was cancelled. */
export const DELETION_CANCELLED_JOB = 'deletion-cancelled';

export const DeletionCancelledJobData = Type.Object({
  to: Recipient,
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

/**
 * How long an account notice (deletion scheduled or cancelled) is retried: a day covers an SMTP
 * outage of a night, and a notice much later than its event would confuse more than it informs.
 */
export const NOTICE_RETRY_WINDOW_MS = 24 * 3600 * 1000;

/** How long what a job's delivery needs is kept past its deadline, for mailers whose clocks run behind. */
export const DEADLINE_MARGIN_MS = 60_000;

/**
 * The hash (beside the queue's keys, in its cluster slot) of a user's deletion notices: `newest`, the
 * job id of the last one queued, and a field for each one queued. A notice recorded there and no
 * longer the newest, still queued through an SMTP outage, would tell a state that no longer holds
 * (deleted after a cancellation, or the reverse): the mailer does not send it. A notice that is not
 * recorded (queued by a gateway of an earlier version) is sent.
 */
export const noticesKey = (prefix: string, userId: string) => `${prefix}:${EMAIL_QUEUE}:notices:${userId}`;

/** The user whose deletion notice a job id names; undefined for other jobs. */
export const noticeUserOf = (jobId: string) => /^deletion-(?:scheduled|cancelled)-(.+)-\d+$/.exec(jobId)?.[1];

/**
 * The same hash for an address's code emails, named by the job's `series`. A new code replaces the
 * address's last one, so a code email still queued through an SMTP outage after a newer one was
 * queued would arrive last with a code that no longer works: the mailer does not send it.
 */
export const codesKey = (prefix: string, series: string) => `${prefix}:${EMAIL_QUEUE}:codes:${series}`;

/**
 * Where the newest email of a job's kind for its recipient is recorded (see noticesKey), for a kind
 * where only the newest is sent: a user's deletion notices, an address's codes (by their series; a
 * code queued without one, by a gateway of an earlier version, has none).
 */
export function newestKeyOf(prefix: string, jobId: string, data: EmailJobs[EmailJobName]) {
  const noticeUser = noticeUserOf(jobId);
  if (noticeUser !== undefined) return noticesKey(prefix, noticeUser);
  return 'series' in data && data.series !== undefined ? codesKey(prefix, data.series) : undefined;
}

/**
 * Where a mailer records that SMTP accepted a job (the time, ms since the epoch), by its id, kept until
 * its deadline has passed: a job run again after a crash is not sent twice, and an operator's look
 * (`limits:show`) tells a code email delivered.
 */
export const deliveredKey = (prefix: string, jobId: string) => `${prefix}:${EMAIL_QUEUE}:delivered:${jobId}`;

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
