import type { DeletionCancelledJobData, DeletionScheduledJobData } from '@tessera/contracts';
import { escapeHtml, formatDate, htmlEmail } from './compose.ts';
import { deliver, type EmailResult, type SendContext } from './deliver.ts';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

const html = (title: string, paragraphs: string[]) =>
  htmlEmail(title, paragraphs.map((text) => `<p>${escapeHtml(text)}</p>`).join('\n'));

/** The deletion is scheduled: when it happens, and that signing in and cancelling keeps the account. */
export function composeDeletionScheduledEmail(
  { to, scheduledFor }: DeletionScheduledJobData,
  product: string,
): Email {
  const date = formatDate(scheduledFor);
  const paragraphs = [
    `Your ${product} account is scheduled for deletion on ${date}.`,
    'On that date your profile is erased and every device is signed out. This cannot be undone.',
    'Changed your mind? Sign in and cancel the deletion before then, and your account stays as it is.',
    'If you did not ask for this, sign in now, cancel the deletion and sign out the devices you do not recognise.',
  ];
  return {
    to,
    subject: `Your ${product} account will be deleted on ${date}`,
    text: `${paragraphs.join('\n\n')}\n`,
    html: html(`Your ${product} account will be deleted`, paragraphs),
  };
}

/** The scheduled deletion was cancelled: the account stays. */
export function composeDeletionCancelledEmail(
  { to, cancelledAt }: DeletionCancelledJobData,
  product: string,
): Email {
  const paragraphs = [
    `The deletion of your ${product} account was cancelled on ${formatDate(cancelledAt)}.`,
    'Your account stays as it is; there is nothing else to do.',
    'If you did not cancel it, sign in and sign out the devices you do not recognise.',
  ];
  return {
    to,
    subject: `Your ${product} account will not be deleted`,
    text: `${paragraphs.join('\n\n')}\n`,
    html: html(`Your ${product} account will not be deleted`, paragraphs),
  };
}

/** Sends the deletion notice; skipped once the date has passed, when the account is already gone. */
export async function sendDeletionScheduled(
  data: DeletionScheduledJobData,
  transport: MailTransport,
  { messageKey, now, product }: SendContext,
): Promise<EmailResult> {
  if (Date.parse(data.scheduledFor) <= now.getTime()) return { skipped: 'expired' };
  await deliver(transport, { ...composeDeletionScheduledEmail(data, product), id: messageKey });
  return { sent: true };
}

/** Sends the cancellation confirmation. */
export async function sendDeletionCancelled(
  data: DeletionCancelledJobData,
  transport: MailTransport,
  { messageKey, product }: SendContext,
): Promise<EmailResult> {
  await deliver(transport, { ...composeDeletionCancelledEmail(data, product), id: messageKey });
  return { sent: true };
}
