import addressparser from 'nodemailer/lib/addressparser';

/**
 * Who the emails speak for: MAIL_FROM's display name (`Acme <no-reply@acme.com>` → `Acme`), or its
 * domain when it has none (`no-reply@acme.com` → `acme.com`).
 */
export function senderName(from: string): string {
  const [sender] = addressparser(from, { flatten: true });
  return sender?.name.trim() || (sender?.address.split('@').pop() ?? from);
}

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

/** `10:00 UTC`. */
export function formatTime(iso: string): string {
  const date = new Date(iso);
  const time = [date.getUTCHours(), date.getUTCMinutes()].map((n) => String(n).padStart(2, '0')).join(':');
  return `${time} UTC`;
}

/** `22 December 2026`, the day in UTC. */
export function formatDay(iso: string): string {
  const date = new Date(iso);
  return `${date.getUTCDate()} ${MONTHS[date.getUTCMonth()]} ${date.getUTCFullYear()}`;
}

/** `22 December 2026 at 10:00 UTC`: one unambiguous form, whatever the reader's locale. */
export function formatDate(iso: string): string {
  return `${formatDay(iso)} at ${formatTime(iso)}`;
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };

/** Text as HTML shows it (a sender named `Smith & Sons`). */
export const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (char) => ENTITIES[char] ?? char);

/**
 * An email's HTML body: in English, as its text says, titled, around `body` (HTML already), as wide
 * as a phone's screen where the client honours it (not laid out 980 px wide and shrunk). Dark text on
 * white, both set, on the body and on a block inside it (some clients drop the body's style): a
 * client in a dark scheme that kept one and darkened the other would show dark text on black.
 */
export const htmlEmail = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light"><meta name="supported-color-schemes" content="light"><title>${escapeHtml(title)}</title></head>
<body style="${PAGE}">
<div style="${PAGE};max-width:560px">
${body}
</div>
</body></html>`;

const PAGE = 'margin:0;padding:16px;background:#ffffff;color:#1a1a1a;font-family:Arial,Helvetica,sans-serif';
