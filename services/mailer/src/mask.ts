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
 * The recipient in any form a server's reply may give it beyond what ADDRESS finds: whole, followed
 * by a mailbox path or holding a character ADDRESS stops at (`mary.o'brien@…/INBOX`), percent-encoded
 * (once or twice, in encoded brackets too), or its local part alone, or the part before a `+` tag
 * (`<jane.doe>`, `User doesn't exist: jane.doe`). As whole words: a local part that is a word of the
 * reply (`user@…` and "User unknown") is masked there too, an address's privacy first.
 */
function recipientForms(recipient: string): string {
  const local = recipient.slice(0, recipient.lastIndexOf('@'));
  const tagless = local.split('+')[0] ?? local;
  const encodings = (text: string) => {
    const encoded = percentEncoded(text);
    return [text, encodeURIComponent(text), encoded, encoded.replaceAll('%', '%25')];
  };
  const forms = alternatives([...encodings(recipient), ...encodings(local), ...encodings(tagless)]);
  return `(?<=^|[^\\w.+%-]|%3C|%22|%27)(?<recipient>${forms})(?=$|%3E|%22|%27|\\.(?!\\w)|[^\\w.+%-])`;
}

// An SMTP reply's status and enhanced status (`554 5.7.1 `), which say how to handle it: never masked.
const STATUS = /^\d{3}[ -](?:\d\.\d{1,3}\.\d{1,3} )?/;

/**
 * Masks every address in a text, such as an SMTP reply (`550 <alice@example.com>: no such user`), and
 * the `recipient` of the email in any form the reply gives it.
 */
export function maskAddresses(text: string, recipient?: string): string {
  const status = recipient ? (STATUS.exec(text)?.[0] ?? '') : '';
  const rest = text.slice(status.length);
  const pattern = recipient ? new RegExp(`${recipientForms(recipient)}|${ADDRESS.source}`, 'gi') : ADDRESS;
  let masked = status;
  let from = 0;
  for (const match of rest.matchAll(pattern)) {
    const [found] = match;
    const end = match.index + found.length;
    const isRecipient = recipient !== undefined && match.groups?.recipient !== undefined;
    const isPath = rest[end] === '/' && !isRecipient;
    masked += rest.slice(from, match.index) + (isPath ? found : maskEmail(isRecipient ? recipient : found));
    from = end;
  }
  return masked + rest.slice(from);
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
