import { formatDateTime, formatWait, type Reader } from './format.ts';

/** What the console reads of a failed call: the fields of the SDK's `TesseraError`. */
export interface Failure {
  status: number;
  /** The envelope's `errors`: the canonical message of the status first, then details. */
  messages: readonly string[];
  /** Seconds, from `Retry-After`. */
  retryAfter?: number | null;
  isNetworkError?: boolean;
}

export function isFailure(error: unknown): error is Failure {
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as Failure).status === 'number' &&
    Array.isArray((error as Failure).messages)
  );
}

const ISO_TIME = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z/g;

/** A detail of the API as a sentence: a capital, its times for the reader, a full stop. */
export function sentence(detail: string, reader: Reader = {}): string {
  const text = detail.trim().replace(ISO_TIME, (iso) => formatDateTime(iso, reader));
  if (text === '') return text;
  const capitalized = text[0]?.toUpperCase() + text.slice(1);
  return /[.!?]$/.test(capitalized) ? capitalized : `${capitalized}.`;
}

/** "Try again in 42 seconds.", when the API said how long to wait. */
export function retryText(failure: Failure): string {
  return failure.retryAfter && failure.retryAfter > 0
    ? `Try again in ${formatWait(failure.retryAfter)}.`
    : 'Try again later.';
}

/** What went wrong, for a person, when no view has a better sentence for it. */
export function failureText(error: unknown, reader: Reader = {}): string {
  if (!isFailure(error)) return 'Something went wrong. Reload the page and try again.';
  if (error.isNetworkError) return 'Cannot reach the server. Check your connection and try again.';
  // The wait is said once, from Retry-After, in words; the API may also say it in a detail.
  const details = error.messages.slice(1).filter((text) => !/^try again in\b/i.test(text));
  const detail = details.map((text) => sentence(text, reader)).join(' ');
  if (error.status === 429) return `${detail || 'Too many requests.'} ${retryText(error)}`;
  if (error.status === 503) return 'The service is unavailable right now. Try again in a moment.';
  if (error.status >= 500) return 'Something went wrong on our side. Try again in a moment.';
  return detail || sentence(error.messages[0] ?? 'Request failed');
}

export interface FieldProblems<F extends string> {
  /** One sentence per field that a detail names, with the field's label in place of its name. */
  byField: Partial<Record<F, string>>;
  /** Details that name none of the fields. */
  other: string[];
}

/**
 * The details of a refused change (400, or 409 for the username), split by the field each one names:
 * the API starts every such detail with the field's name ("username is taken").
 */
export function fieldProblems<F extends string>(
  error: Failure,
  labels: Record<F, string>,
  reader: Reader = {},
): FieldProblems<F> {
  const byField: Partial<Record<F, string>> = {};
  const other: string[] = [];
  for (const detail of error.messages.slice(1)) {
    const field = (Object.keys(labels) as F[]).find((name) => new RegExp(`^${name}\\b`).test(detail));
    if (field === undefined) {
      other.push(sentence(detail, reader));
      continue;
    }
    const text = sentence(`${labels[field]}${detail.slice(field.length)}`, reader);
    byField[field] = byField[field] ? `${byField[field]} ${text}` : text;
  }
  return { byField, other };
}
