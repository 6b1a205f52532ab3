import type { MailJobKeys } from '@tessera/contracts';
import { UnrecoverableError } from 'bullmq';
import { maskAddresses } from './mask.ts';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

/**
 * What an email job comes to: sent; skipped because the email would no longer be true (its date
 * passed, or a newer code for the address or notice of the account replaced it); or skipped because SMTP had already
 * accepted it, in a run that ended before the job completed.
 */
export type EmailResult = { sent: true } | { skipped: 'expired' | 'replaced' | 'delivered' };

/** What a job's email is written and sent with, besides the job's data. */
export interface SendContext {
  /** What names the job's emails (their Message-ID, mime.ts): its id and when it was queued. */
  messageKey: string;
  now: Date;
  /** MAIL_JOB_KEY's keys, which open a code job's sealed code. */
  keys: MailJobKeys;
  /** Whom the emails speak for (`senderName` of MAIL_FROM). */
  product: string;
  /** Where a user keeps their account (MAIL_ACCOUNT_URL), linked in the account notices. */
  accountUrl?: string | undefined;
}

// The SMTP commands whose refusal is about this message: its recipient, or its content.
const OF_THE_MESSAGE = new Set(['RCPT TO', 'DATA']);
// An enhanced status of security or policy (RFC 3463 5.7.x): to a recipient, the relay refusing to
// relay for the mailer ("5.7.1 Relay access denied", a login it wants), not the recipient. Said in
// words alone by relays that send no enhanced status (Exim's "550 relay not permitted").
const POLICY = /^\d{3}[ -](?:5\.7\.\d{1,3}\b|.*\brelay(?:ing)?\b|.*\bauthenticat)/i;
// "Requested mail action aborted: exceeded storage allocation": to a recipient, a full mailbox,
// which RFC 5321 (4.5.3.1.10) has clients take as temporary; to the content, a message too large.
const MAILBOX_FULL = 552;
// "Bad sequence of commands" (a sender it did not take, a login it wants first): the conversation's
// fault, not the message's, whatever command it answers.
const BAD_SEQUENCE = 503;

/**
 * Sends one email of a job. An SMTP 5xx to the message itself (no such mailbox, content refused)
 * will not get better: the job fails for good instead of being retried, its reason the server's
 * reply (addresses masked). Anything else is thrown as it is, for BullMQ to retry until the email's
 * deadline: also a 5xx to the login (`AUTH`), to the sender (`MAIL FROM`), a 503 (bad sequence) or,
 * on policy, to a recipient, which are the mailer's configuration, for its operator to fix meanwhile,
 * and a 552 to a recipient (a full mailbox, which may be emptied).
 */
export async function deliver(transport: MailTransport, email: Email): Promise<void> {
  try {
    await transport.send(email);
  } catch (error) {
    const { responseCode, command, response } = error as {
      responseCode?: number;
      command?: string;
      response?: unknown;
    };
    // Masked before it is read too: an address (relay@…) is no word of the server's.
    const reply = maskAddresses(typeof response === 'string' ? response : String(responseCode));
    const ofTheMessage =
      OF_THE_MESSAGE.has(command ?? '') &&
      responseCode !== BAD_SEQUENCE &&
      !(command === 'RCPT TO' && (POLICY.test(reply) || responseCode === MAILBOX_FULL));
    if (responseCode !== undefined && responseCode >= 500 && ofTheMessage)
      throw new UnrecoverableError(`SMTP rejected the message permanently: ${reply}`);
    throw error;
  }
}
