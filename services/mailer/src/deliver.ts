import { UnrecoverableError } from 'bullmq';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

/**
 * What an email job comes to: sent; skipped because the email would no longer be true; or skipped
 * because SMTP had already accepted it, in a run that ended before the job completed.
 */
export type EmailResult = { sent: true } | { skipped: 'expired' | 'delivered' };

/**
 * Sends one email of a job. An SMTP 5xx (e.g. no such mailbox) will not get better: the job fails
 * for good instead of being retried; anything else is thrown as it is, for BullMQ to retry.
 */
export async function deliver(transport: MailTransport, email: Email): Promise<void> {
  try {
    await transport.send(email);
  } catch (error) {
    const responseCode = (error as { responseCode?: number }).responseCode;
    if (responseCode !== undefined && responseCode >= 500) {
      throw new UnrecoverableError(`SMTP rejected the message permanently (${responseCode})`);
    }
    throw error;
  }
}
