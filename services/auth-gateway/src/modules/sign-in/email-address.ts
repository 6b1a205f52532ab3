import { domainToASCII, domainToUnicode } from 'node:url';

// RFC 5321 §4.5.3.1.1 and RFC 1035 §2.3.4.
const LOCAL_PART_MAX = 64;
const LABEL_MAX = 63;
const NON_ASCII = /[^\p{ASCII}]/u;
// What no domain name holds but a URL host parser would act on (cut at, decode, drop): such a domain
// is left as written, for the format check to refuse, not read as the host of a URL.
const NOT_A_NAME = /[\s/?#\\%:@[\]\u00AD]/;
// Providers whose inboxes ignore the dots of the local part; googlemail.com is gmail.com.
const DOTLESS_DOMAINS: ReadonlyMap<string, string> = new Map([
  ['gmail.com', 'gmail.com'],
  ['googlemail.com', 'gmail.com'],
]);

/** An address split at its last @ (the format admits none unquoted in the local part, nor quotes). */
function split(email: string): { local: string; domain: string } | undefined {
  const at = email.lastIndexOf('@');
  return at < 0 ? undefined : { local: email.slice(0, at), domain: email.slice(at + 1) };
}

// ASCII letters only: Unicode case mapping would turn the Kelvin sign (U+212A) into a k.
const asciiLowerCase = (text: string) => text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());

/**
 * The address as it is used everywhere (API.md §1, extended): trimmed, lower-cased, and a Unicode
 * domain in the ASCII form DNS and SMTP use, so `Ute@Bücher.de` and `ute@xn--bcher-kva.de` are one
 * account. A domain that is no valid name is left as written, for the format check to refuse.
 */
export function normalizeEmail(raw: string): string {
  const email = raw.trim();
  const parts = split(email);
  if (parts === undefined || !NON_ASCII.test(parts.domain) || NOT_A_NAME.test(parts.domain))
    return asciiLowerCase(email);
  return `${asciiLowerCase(parts.local)}@${domainToASCII(parts.domain) || parts.domain}`;
}

/**
 * Why no code could ever reach a normalized address that the format admits, or undefined: a detail
 * for `body.email …`. Relays would refuse it (SMTP 553) after the client was told a code is coming.
 */
export function undeliverable(email: string): string | undefined {
  const parts = split(email);
  if (parts === undefined) return undefined;
  const labels = parts.domain.split('.');
  const topLevel = labels.at(-1) ?? '';
  // SMTPUTF8, which such a mailbox needs, is not offered by every relay on the way.
  if (NON_ASCII.test(parts.local)) return 'is refused: non-ASCII characters before the @ are not supported';
  if (parts.local.length > LOCAL_PART_MAX) return `has more than ${LOCAL_PART_MAX} characters before the @`;
  if (labels.some((label) => label.length > LABEL_MAX))
    return `has a domain label of more than ${LABEL_MAX} characters`;
  if (labels.some(isBadPunycode))
    return 'has a domain label that is no internationalized name (an `xn--` label that does not decode to one)';
  if (/^[0-9]+$/.test(topLevel))
    return 'must end in a domain name: an all-numeric top-level domain or an IP address receives no mail';
  // RFC 6761; deleted accounts' addresses are in it too, so nobody can ask a code for one.
  if (topLevel === 'invalid') return 'is in the .invalid domain, which never receives mail';
  return undefined;
}

/**
 * An `xn--` label that is not the ASCII form of a name IDNA allows: not punycode at all (`xn--zz`), or
 * the form of a spelling no registry takes (`xn--bucher-xyd`, `bücher` with a combining diaeresis,
 * which readers of punycode would show as `bücher`). Such a domain receives no mail.
 */
function isBadPunycode(label: string): boolean {
  if (!label.startsWith('xn--')) return false;
  const name = domainToUnicode(label);
  return name === '' || name.startsWith('xn--') || domainToASCII(name) !== label;
}

/**
 * The inbox an address delivers to, for counting the codes sent there: a `+tag` is dropped
 * (`victim+1@example.net` is `victim@example.net`), and at Gmail the dots too (`v.ictim@googlemail.com`
 * is `victim@gmail.com`).
 */
export function mailboxOf(email: string): string {
  const parts = split(email);
  if (parts === undefined) return email;
  const plus = parts.local.indexOf('+');
  const local = plus > 0 ? parts.local.slice(0, plus) : parts.local;
  const dotless = DOTLESS_DOMAINS.get(parts.domain);
  return dotless === undefined ? `${local}@${parts.domain}` : `${local.replaceAll('.', '')}@${dotless}`;
}
