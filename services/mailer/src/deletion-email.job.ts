import type { DeletionCancelledJobData, DeletionScheduledJobData } from '@tessera/contracts';
import { deliver, type EmailResult } from './deliver.ts';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/** `22 December 2026 at 10:00 UTC`: one unambiguous form, whatever the reader's locale. */
export function formatDate(iso: string): string {
  const date = new Date(iso);
  const time = [date.getUTCHours(), date.getUTCMinutes()].map((n) => String(n).padStart(2, '0')).join(':');
  return `${date.getUTCDate()} ${MONTHS[date.getUTCMonth()]} ${date.getUTCFullYear()} at ${time} UTC`;
}

const html = (paragraphs: string[]) =>
  `<!doctype html><html><body style="font-family:sans-serif">
${paragraphs.map((text) => `<p>${text}</p>`).join('\n')}
</body></html>`;

/** The deletion is scheduled: when it happens, and that signing in and cancelling keeps the account. */
export function composeDeletionScheduledEmail({ to, scheduledFor }: DeletionScheduledJobData): Email {
  const date = formatDate(scheduledFor);
  const paragraphs = [
    `Your Tessera account is scheduled for deletion on ${date}.`,
    'On that date your profile is erased and every device is signed out. This cannot be undone.',
    'Changed your mind? Sign in and cancel the deletion before then, and your account stays as it is.',
    'If you did not ask for this, sign in now, cancel the deletion and sign out the devices you do not recognise.',
  ];
  return {
    to,
    subject: `Your Tessera account will be deleted on ${date}`,
    text: `${paragraphs.join('\n\n')}\n`,
    html: html(paragraphs),
  };
}

/** The scheduled deletion was cancelled: the account stays. */
export function composeDeletionCancelledEmail({ to, cancelledAt }: DeletionCancelledJobData): Email {
  const paragraphs = [
    `The deletion of your Tessera account was cancelled on ${formatDate(cancelledAt)}.`,
    'Your account stays as it is; there is nothing else to do.',
    'If you did not cancel it, sign in and sign out the devices you do not recognise.',
  ];
  return {
    to,
    subject: 'Your Tessera account will not be deleted',
    text: `${paragraphs.join('\n\n')}\n`,
    html: html(paragraphs),
  };
}

/** Sends the deletion notice; skipped once the date has passed, when the account is already gone. */
export async function sendDeletionScheduled(
  data: DeletionScheduledJobData,
  transport: MailTransport,
  now: Date,
): Promise<EmailResult> {
  if (Date.parse(data.scheduledFor) <= now.getTime()) return { skipped: 'expired' };
  await deliver(transport, composeDeletionScheduledEmail(data));
  return { sent: true };
}

/** Sends the cancellation confirmation. */
export async function sendDeletionCancelled(
  data: DeletionCancelledJobData,
  transport: MailTransport,
): Promise<EmailResult> {
  await deliver(transport, composeDeletionCancelledEmail(data));
  return { sent: true };
}
