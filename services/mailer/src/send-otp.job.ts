import { type MailJobKeys, openCode, type SendOtpJobData, UnknownMailJobKeyError } from '@tessera/contracts';
import { UnrecoverableError } from 'bullmq';
import { escapeHtml, formatTime, htmlEmail } from './compose.ts';
import { deliver, type SendContext } from './deliver.ts';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

/** What the code email says: the code, to whom, and until when. */
export interface OtpEmail {
  to: string;
  code: string;
  expiresAt: string;
}

/**
 * The code email: the code first in the subject and in both bodies, the product it signs in to (a code
 * is only safe typed into that product), and when it expires: at its time, or at the next code. `product` names the sender (`senderName`).
 */
export function composeOtpEmail({ to, code, expiresAt }: OtpEmail, now: Date, product: string): Email {
  const subject = `${code} is your ${product} sign-in code`;
  // A new code replaces the address's code: the newest email is the one to use.
  const validity = `${expiry(expiresAt, now)} If you ask for another code, this one stops working.`;
  const warnings = [
    `Type it only where you are signing in to ${product}, and never share it: nobody from ${product} will ever ask you for it.`,
    'If you did not ask to sign in, you can ignore this email.',
  ];
  return {
    to,
    subject,
    // The code on a line of its own, as in the HTML: easy to find, and to copy alone.
    text: `Your ${product} sign-in code is:\n\n${code}\n\n${validity}\n${warnings.join('\n')}\n`,
    html: htmlEmail(
      subject,
      `<p>Your ${escapeHtml(product)} sign-in code is</p>
<p style="font-size:32px;font-weight:bold;letter-spacing:8px">${code}</p>
<p>${validity}</p><p>${warnings.map(escapeHtml).join('<br>')}</p>`,
    ),
  };
}

/** Seconds of queueing forgiven, so that a fresh 5-minute code says 5 minutes, not 4. */
const QUEUEING_MS = 5_000;

/**
 * "It expires in 4 minutes, at 12:20 UTC.": the minutes left, rounded down (a few seconds of queueing
 * forgiven), and, for an email that arrives late, the clock's minute, rounded down too (a code that
 * ends at 12:20:30 no longer works at 12:20:45: "before 12:21" would promise it).
 */
function expiry(expiresAt: string, now: Date): string {
  const end = Date.parse(expiresAt);
  const minutes = Math.floor((end + QUEUEING_MS - now.getTime()) / 60_000);
  const left = minutes < 1 ? 'less than a minute' : `${minutes} minute${minutes === 1 ? '' : 's'}`;
  const at = new Date(Math.floor(end / 60_000) * 60_000).toISOString();
  return `It expires in ${left}, at ${formatTime(at)}.`;
}

/** The code of a job; a seal that does not open with a known key will never open, so it is not retried. */
function opened({ sealedCode, to }: SendOtpJobData, keys: MailJobKeys): string {
  let code: string;
  try {
    code = openCode(sealedCode, to, keys);
  } catch (error) {
    // A key this mailer lacks (no key of that id, or another key under it) may be another mailer's,
    // or come with this one's next deploy: retried, until the code expires.
    if (error instanceof UnknownMailJobKeyError) throw error;
    throw new UnrecoverableError((error as Error).message);
  }
  // Four digits, as the gateway makes them: whatever else a seal held is never written into an email.
  if (!/^\d{4}$/.test(code)) throw new UnrecoverableError('The sealed code is not a 4-digit code');
  return code;
}

/**
 * Delivers one code email (the worker has checked the code has not expired). An SMTP 5xx (e.g. no
 * such mailbox) will not get better and is not retried.
 */
export async function sendOtp(
  data: SendOtpJobData,
  transport: MailTransport,
  { messageKey, now, keys, product }: SendContext,
): Promise<{ sent: true }> {
  const code = opened(data, keys);
  const email = composeOtpEmail({ to: data.to, code, expiresAt: data.expiresAt }, now, product);
  await deliver(transport, { ...email, id: messageKey });
  return { sent: true };
}
