import type { MailJobKeys } from '@tessera/contracts';
import { UnrecoverableError } from 'bullmq';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

/**
 * What an email job comes to: sent; skipped because the email would no longer be true; or skipped
 * because SMTP had already accepted it, in a run that ended before the job completed.
 */
export type EmailResult = { sent: true } | { skipped: 'expired' | 'delivered' };

/** What a job's email is written and sent with, besides the job's data. */
export interface SendContext {
  now: Date;
  /** MAIL_JOB_KEY's keys, which open a code job's sealed code. */
  keys: MailJobKeys;
  /** Whom the emails speak for (`senderName` of MAIL_FROM). */
  product: string;
}

// The SMTP commands whose refusal is about this message: its recipient, or its content.
const OF_THE_MESSAGE = new Set(['RCPT TO', 'DATA']);

/**
 * Sends one email of a job. An SMTP 5xx to the message itself (no such mailbox, content refused)
 * will not get better: the job fails for good instead of being retried. Anything else is thrown as
 * it is, for BullMQ to retry until the email's deadline: also a 5xx to the login (`AUTH`) or to the
 * sender (`MAIL FROM`), which is the mailer's configuration, for its operator to fix meanwhile.
 */
export async function deliver(transport: MailTransport, email: Email): Promise<void> {
  try {
    await transport.send(email);
  } catch (error) {
    const { responseCode, command } = error as { responseCode?: number; command?: string };
    if (responseCode !== undefined && responseCode >= 500 && OF_THE_MESSAGE.has(command ?? '')) {
      throw new UnrecoverableError(`SMTP rejected the message permanently (${responseCode})`);
    }
    throw error;
  }
}
