import type { SendOtpJobData } from '@tessera/contracts';
import { deliver, type EmailResult } from './deliver.ts';
import type { Email, MailTransport } from './transport.ts';

export type SendOtpResult = EmailResult;

/** The code email: the code in the subject and in both bodies. */
export function composeOtpEmail({ to, code, expiresAt }: SendOtpJobData, now: Date): Email {
  const minutes = Math.max(1, Math.round((Date.parse(expiresAt) - now.getTime()) / 60_000));
  const validity = `It expires in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
  const ignore = 'If you did not ask to sign in, you can ignore this email.';
  return {
    to,
    subject: `${code} is your sign-in code`,
    text: `Your sign-in code is ${code}\n\n${validity}\n${ignore}\n`,
    html: `<!doctype html><html><body style="font-family:sans-serif">
<p>Your sign-in code is</p>
<p style="font-size:32px;font-weight:bold;letter-spacing:8px">${code}</p>
<p>${validity}</p><p style="color:#666">${ignore}</p>
</body></html>`,
  };
}

/**
 * Delivers one code email. A code that has already expired is skipped (the user has asked for a
 * new one by now); an SMTP 5xx (e.g. no such mailbox) will not get better and is not retried.
 */
export async function sendOtp(
  data: SendOtpJobData,
  transport: MailTransport,
  now: Date,
): Promise<SendOtpResult> {
  if (Date.parse(data.expiresAt) <= now.getTime()) return { skipped: 'expired' };
  await deliver(transport, composeOtpEmail(data, now));
  return { sent: true };
}
