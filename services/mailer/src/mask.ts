/** `a***@example.com`: enough to tell jobs apart in logs, not enough to harvest addresses. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return at < 1 ? '***' : `${email[0]}***${email.slice(at)}`;
}

/** Whether `email` is masked already (masking it again changes nothing): a redacted job's address. */
export const isMasked = (email: string) => maskEmail(email) === email;

// Anything with an `@` between characters that no address holds unquoted. The part after the last
// `@` holds no `/`: one followed by `/` is a path's, such as the `name@version/` of a package in a
// stack trace (pnpm's `.pnpm/nodemailer@8.0.1/…`), and is left as it is.
const ADDRESS = /[^\s<>()[\]"',;:]+@[^\s<>()[\]"',;:@/]+/g;

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The recipient in the forms a server's reply may quote it, which need not look like an address: its
 * local part alone (`<jane.doe>: user unknown`), percent-encoded in a URL, followed by a mailbox path,
 * or holding a character ADDRESS stops at (`mary.o'brien@…`). Whole words only (a sentence's full
 * stop may follow).
 */
function recipientForms(recipient: string): string {
  const local = recipient.slice(0, recipient.lastIndexOf('@'));
  const forms = [...new Set([recipient, encodeURIComponent(recipient), local, encodeURIComponent(local)])]
    .filter((form) => form.length > 0)
    .sort((a, b) => b.length - a.length);
  return `(?<![\\w.+%-])(?<recipient>${forms.map(escapeRegExp).join('|')})(?![\\w+%-]|\\.\\w)`;
}

/**
 * Masks every address in a text, such as an SMTP reply (`550 <alice@example.com>: no such user`), and
 * the `recipient` of the email in any form the reply gives it.
 */
export function maskAddresses(text: string, recipient?: string): string {
  const pattern = recipient ? new RegExp(`${recipientForms(recipient)}|${ADDRESS.source}`, 'gi') : ADDRESS;
  let masked = '';
  let from = 0;
  for (const match of text.matchAll(pattern)) {
    const [found] = match;
    const end = match.index + found.length;
    const isPath = text[end] === '/' && !match.groups?.recipient;
    masked +=
      text.slice(from, match.index) +
      (isPath ? found : maskEmail(recipient && match.groups?.recipient ? recipient : found));
    from = end;
  }
  return masked + text.slice(from);
}

/**
 * Masks the addresses in what is kept of a delivery error, and its `recipient` in any form: its
 * message and stack (logged, stored by BullMQ as the job's failure, recorded on spans) and the SMTP
 * reply. Other properties are kept.
 */
export function maskAddressesInError(error: unknown, recipient?: string): unknown {
  if (!(error instanceof Error)) return error;
  error.message = maskAddresses(error.message, recipient);
  if (error.stack) error.stack = maskAddresses(error.stack, recipient);
  const smtp = error as Error & { response?: unknown };
  if (typeof smtp.response === 'string') smtp.response = maskAddresses(smtp.response, recipient);
  return error;
}
