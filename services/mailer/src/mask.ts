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
const alternatives = (forms: string[]) =>
  [...new Set(forms)]
    .filter((form) => form.length > 0)
    .sort((a, b) => b.length - a.length)
    .map(escapeRegExp)
    .join('|');

/** Every byte but letters, digits, `.`, `_` and `-` percent-encoded, as most URL encoders write it. */
const percentEncoded = (text: string) =>
  [...new TextEncoder().encode(text)]
    .map((byte) => {
      const char = String.fromCharCode(byte);
      return /[A-Za-z0-9._-]/.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');

/**
 * The recipient in the forms a server's reply may give it beyond what ADDRESS finds: whole, followed
 * by a mailbox path or holding a character ADDRESS stops at (`mary.o'brien@…/INBOX`), as a word;
 * percent-encoded in a URL; and its local part alone (or the part before a `+` tag) where a reply
 * quotes one: `<jane.doe>`, `"jane.doe"`, `rcpt=jane.doe`. Not a local part in free text, where it
 * may be a word of the reply itself (`user@…` and "User unknown").
 */
function recipientForms(recipient: string): string {
  const local = recipient.slice(0, recipient.lastIndexOf('@'));
  const tagless = local.split('+')[0] ?? local;
  const encodings = (text: string) => [text, encodeURIComponent(text), percentEncoded(text)];
  const whole = alternatives(encodings(recipient));
  const bare = alternatives([...encodings(local), ...encodings(tagless)]);
  return `(?<![\\w.+%-])(?<recipient>${whole})(?![\\w+%-]|\\.\\w)|(?<=[<"'=/])(?<bare>${bare})(?=[>"'&\\s]|$)`;
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
    const isRecipient =
      recipient !== undefined && (match.groups?.recipient ?? match.groups?.bare) !== undefined;
    const isPath = text[end] === '/' && !isRecipient;
    masked += text.slice(from, match.index) + (isPath ? found : maskEmail(isRecipient ? recipient : found));
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
