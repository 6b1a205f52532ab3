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

/** Masks every address in a text, such as an SMTP reply (`550 <alice@example.com>: no such user`). */
export function maskAddresses(text: string): string {
  return text.replace(ADDRESS, (found, at: number) =>
    text[at + found.length] === '/' ? found : maskEmail(found),
  );
}

/**
 * Masks the addresses in what is kept of a delivery error: its message and stack (logged, stored by
 * BullMQ as the job's failure, recorded on spans) and the SMTP reply. Other properties are kept.
 */
export function maskAddressesInError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  error.message = maskAddresses(error.message);
  if (error.stack) error.stack = maskAddresses(error.stack);
  const smtp = error as Error & { response?: unknown };
  if (typeof smtp.response === 'string') smtp.response = maskAddresses(smtp.response);
  return error;
}
