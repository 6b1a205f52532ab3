import { type MailJobKeys, openCode, type SendOtpJobData, UnknownMailJobKeyError } from '@tessera/contracts';
import { UnrecoverableError } from 'bullmq';
import { deliver } from './deliver.ts';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

/** What the code email says: the code, to whom, and until when. */
export interface OtpEmail {
  to: string;
  code: string;
  expiresAt: string;
}

/** The code email: the code in the subject and in both bodies. */
export function composeOtpEmail({ to, code, expiresAt }: OtpEmail, now: Date): Email {
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

/** The code of a job; a seal that does not open with a known key will never open, so it is not retried. */
function opened({ sealedCode, to }: SendOtpJobData, keys: MailJobKeys): string {
  try {
    return openCode(sealedCode, to, keys);
  } catch (error) {
    // A key id this mailer lacks may come with its next deploy (a rotation under way): retried.
    if (error instanceof UnknownMailJobKeyError) throw error;
    throw new UnrecoverableError((error as Error).message);
  }
}

/**
 * Delivers one code email (the worker has checked the code has not expired). An SMTP 5xx (e.g. no
 * such mailbox) will not get better and is not retried.
 */
export async function sendOtp(
  data: SendOtpJobData,
  transport: MailTransport,
  now: Date,
  keys: MailJobKeys,
): Promise<{ sent: true }> {
  const code = opened(data, keys);
  await deliver(transport, composeOtpEmail({ to: data.to, code, expiresAt: data.expiresAt }, now));
  return { sent: true };
}
