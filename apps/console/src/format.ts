import { toUnicode } from 'punycode.js';

/**
 * Locale and time zone of the reader. The time zone defaults to the browser's; the locale to the
 * reader's English (see `english`). Tests pass fixed ones.
 */
export interface Reader {
  locale?: string;
  timeZone?: string;
}

/**
 * The page is in English (`lang="en"`), so its dates are too: in the browser's own English when it
 * lists one ("en-GB": 22 Nov 2026), else in plain "en". Never "vor 5 Minuten" or "27. Dezember"
 * next to English words, read out by an English voice.
 */
export function english(languages: readonly string[] = globalThis.navigator?.languages ?? []): string {
  return languages.find((language) => /^en(-|$)/i.test(language)) ?? 'en';
}

const plural = (count: number, unit: string) => `${count} ${unit}${count === 1 ? '' : 's'}`;

/**
 * How long to wait, in words, from a `Retry-After` in seconds: "42 seconds", "3 minutes",
 * "1 hour 5 minutes". Rounded up, so that trying again after that long always works.
 */
export function formatWait(seconds: number): string {
  const total = Math.max(1, Math.ceil(seconds));
  if (total < 60) return plural(total, 'second');
  const minutes = Math.ceil(total / 60);
  if (minutes < 60) return plural(minutes, 'minute');
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  return rest === 0 ? plural(hours, 'hour') : `${plural(hours, 'hour')} ${plural(rest, 'minute')}`;
}

/** A moment, to the minute: "Nov 22, 2026, 10:00 AM" in en-US. */
export function formatDateTime(iso: string, { locale = english(), timeZone }: Reader = {}): string {
  return new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short', timeZone }).format(
    new Date(iso),
  );
}

/** A day: "December 22, 2026" in en-US. */
export function formatDate(iso: string, { locale = english(), timeZone }: Reader = {}): string {
  return new Intl.DateTimeFormat(locale, { dateStyle: 'long', timeZone }).format(new Date(iso));
}

/** A time of day: "4:42 PM" in en-US. */
export function formatTime(iso: string, { locale = english(), timeZone }: Reader = {}): string {
  return new Intl.DateTimeFormat(locale, { timeStyle: 'short', timeZone }).format(new Date(iso));
}

const STEPS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['second', 60],
  ['minute', 60],
  ['hour', 24],
  ['day', 30],
  ['month', 12],
  ['year', Number.POSITIVE_INFINITY],
];

/** How long ago (or how soon), in the largest unit that fits: "5 minutes ago", "yesterday", "in 2 days". */
export function formatRelative(iso: string, now: Date, { locale = english() }: Reader = {}): string {
  let amount = (new Date(iso).getTime() - now.getTime()) / 1000;
  if (Math.abs(amount) < 45) return 'just now';
  const words = new Intl.RelativeTimeFormat(locale, { numeric: 'auto' });
  for (const [unit, size] of STEPS) {
    if (Math.abs(amount) < size) return words.format(Math.round(amount), unit);
    amount /= size;
  }
  return words.format(Math.round(amount), 'year');
}

/**
 * How long ago something the server stamped happened, on this device's clock: a time after `now`
 * (the device's clock behind the server's) is "just now", not "in 2 hours".
 */
export function formatAgo(iso: string, now: Date, reader: Reader = {}): string {
  return formatRelative(iso, new Date(Math.max(now.getTime(), new Date(iso).getTime())), reader);
}

// Letters of one writing system (Japanese and Korean mix theirs with Han), with digits and hyphens:
// what browsers ask of a name before they show it decoded. A label that mixes them (a Cyrillic `а`
// among Latin letters) keeps its `xn--` form, which shows the mix.
const ONE_SCRIPT = [
  ...['Latin', 'Greek', 'Cyrillic', 'Armenian', 'Georgian', 'Hebrew', 'Arabic', 'Thai', 'Devanagari'].map(
    (script) => [script],
  ),
  ['Han', 'Hiragana', 'Katakana'],
  ['Han', 'Hangul'],
].map((scripts) => {
  const letters = scripts.map((script) => `\\p{Script=${script}}`).join('');
  // ー, the Japanese prolonged sound mark, is of no script of its own.
  return new RegExp(`^[${letters}\\p{Nd}ー-]+$`, 'u');
});

/**
 * An address as its owner knows it: the domain's internationalized labels (`xn--bcher-kva`) decoded
 * (`bücher`) where each is written in one script; the API answers every address in its ASCII form.
 */
export function displayEmail(email: string): string {
  const at = email.lastIndexOf('@');
  if (at < 0) return email;
  const labels = email
    .slice(at + 1)
    .split('.')
    .map((label) => {
      if (!label.startsWith('xn--')) return label;
      try {
        const name = toUnicode(label);
        return ONE_SCRIPT.some((script) => script.test(name)) ? name : label;
      } catch {
        return label;
      }
    });
  return `${email.slice(0, at + 1)}${labels.join('.')}`;
}
