import type { DeletionCancelledJobData, DeletionScheduledJobData } from '@tessera/contracts';
import { escapeHtml, formatDate, formatDay, htmlEmail } from './compose.ts';
import { deliver, type EmailResult, type SendContext } from './deliver.ts';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

/** Its paragraphs, the account page's address in them a link. */
const html = (title: string, paragraphs: string[], accountUrl: string | undefined) => {
  const link = accountUrl && escapeHtml(accountUrl);
  const linked = (text: string) =>
    link ? text.replaceAll(link, `<a href="${link}" style="color:#0b57d0">${link}</a>`) : text;
  return htmlEmail(title, paragraphs.map((text) => `<p>${linked(escapeHtml(text))}</p>`).join('\n'));
};

/** Where to sign in, when MAIL_ACCOUNT_URL says. */
const at = (accountUrl: string | undefined) => (accountUrl ? ` at ${accountUrl}` : '');

/** The deletion is scheduled: when it happens, and that signing in and cancelling keeps the account. */
export function composeDeletionScheduledEmail(
  { to, scheduledFor }: DeletionScheduledJobData,
  now: Date,
  product: string,
  accountUrl?: string,
): Email {
  const date = formatDate(scheduledFor);
  const paragraphs = [
    `Your ${product} account is scheduled for deletion on ${date}.`,
    'On that date your account and everything in it are deleted for good, and every device is signed out. This cannot be undone.',
    `Changed your mind? Sign in${at(accountUrl)} and cancel the deletion ${inTime(scheduledFor, now)}, and your account stays as it is.`,
    'If you did not ask for this, sign in now, cancel the deletion and sign out the devices you do not recognise.',
  ];
  return {
    to,
    subject: `Your ${product} account will be deleted on ${date}`,
    text: `${paragraphs.join('\n\n')}\n`,
    html: html(`Your ${product} account will be deleted`, paragraphs, accountUrl),
  };
}

/**
 * By when to cancel: the last day whose end, in every time zone (UTC−12 the latest), comes before
 * the deletion, so that a reader who takes "by 27 December" in their own zone is in time (the date
 * above is in UTC); "before then" when that day is already over somewhere (UTC+14 the first), as
 * with a grace period of hours.
 */
function inTime(scheduledFor: string, now: Date): string {
  const lastDay = new Date(Date.parse(scheduledFor) - 36 * HOUR);
  const overFirst =
    Date.UTC(lastDay.getUTCFullYear(), lastDay.getUTCMonth(), lastDay.getUTCDate()) + 10 * HOUR;
  return overFirst > now.getTime()
    ? `by ${formatDay(lastDay.toISOString())} wherever you are`
    : 'before then';
}

const HOUR = 3600_000;

/** The scheduled deletion was cancelled: the account stays. */
export function composeDeletionCancelledEmail(
  { to, cancelledAt }: DeletionCancelledJobData,
  product: string,
  accountUrl?: string,
): Email {
  const paragraphs = [
    `Your ${product} account will not be deleted: its deletion was cancelled on ${formatDate(cancelledAt)}.`,
    'Your account stays as it is; there is nothing else to do.',
    `If you did not cancel it, sign in${at(accountUrl)} and sign out the devices you do not recognise.`,
  ];
  return {
    to,
    subject: `Your ${product} account will not be deleted`,
    text: `${paragraphs.join('\n\n')}\n`,
    html: html(`Your ${product} account will not be deleted`, paragraphs, accountUrl),
  };
}

/** Sends the deletion notice; skipped once the date has passed, when the account is already gone. */
export async function sendDeletionScheduled(
  data: DeletionScheduledJobData,
  transport: MailTransport,
  { messageKey, now, product, accountUrl }: SendContext,
): Promise<EmailResult> {
  if (Date.parse(data.scheduledFor) <= now.getTime()) return { skipped: 'expired' };
  const email = composeDeletionScheduledEmail(data, now, product, accountUrl);
  await deliver(transport, { ...email, id: messageKey });
  return { sent: true };
}

/** Sends the cancellation confirmation. */
export async function sendDeletionCancelled(
  data: DeletionCancelledJobData,
  transport: MailTransport,
  { messageKey, product, accountUrl }: SendContext,
): Promise<EmailResult> {
  await deliver(transport, { ...composeDeletionCancelledEmail(data, product, accountUrl), id: messageKey });
  return { sent: true };
}
