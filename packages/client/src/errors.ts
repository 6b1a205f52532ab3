export interface TesseraErrorInit {
  status: number;
  messages: string[];
  code?: string | undefined;
  retryAfter?: number | undefined;
  isNetworkError?: boolean;
  cause?: unknown;
}

/**
 * Every failure of the client. `status` is the HTTP status (0 when no response arrived), `messages`
 * the envelope's `errors` (the canonical message first, then details), `code` the gateway's stable
 * code of the error (`Tessera-Error-Code`: `OTP_INVALID`, `SESSION_ENDED`, …), the client's own
 * `STORAGE_FAILED` when the token storage failed, else undefined (the gateway did not answer),
 * `retryAfter` the seconds of `Retry-After` when the server sent one, and `isNetworkError` is true
 * when the request never got an envelope back: fetch rejected, or the body was not an envelope (a
 * proxy's error page, say). Branch on `code`, not on the words of `messages`.
 */
export class TesseraError extends Error {
  override readonly name = 'TesseraError';
  readonly status: number;
  readonly messages: string[];
  readonly code: string | undefined;
  readonly retryAfter: number | undefined;
  readonly isNetworkError: boolean;

  constructor({ status, messages, code, retryAfter, isNetworkError = false, cause }: TesseraErrorInit) {
    const [first = 'Request failed', ...details] = messages;
    super(details.length > 0 ? `${first}: ${details.join('; ')}` : first, { cause });
    this.status = status;
    this.messages = messages;
    this.code = code;
    this.retryAfter = retryAfter;
    this.isNetworkError = isNetworkError;
  }
}

/** The gateway's own refusal of a token (its 401 envelope, not a proxy's page): the session is over. */
export const isRefusal = (error: unknown): error is TesseraError =>
  error instanceof TesseraError && error.status === 401 && !error.isNetworkError;

/** What the client throws for a call that needs a session when it has none: the server's 401, unsent. */
export const notSignedIn = () => new TesseraError({ status: 401, messages: ['Authentication required'] });

/**
 * What the client throws when the token storage failed (`localStorageStorage` without localStorage,
 * a full quota, a locked keychain): no status, as nothing was answered, and not the network's fault.
 * The storage's error is the `cause` only: its message may quote what was stored (a JSON.parse of a
 * corrupt token file does), which must not reach the logs that print this error's message.
 */
export const storageFailed = (cause: unknown) =>
  new TesseraError({ status: 0, messages: ['The token storage failed'], code: 'STORAGE_FAILED', cause });

/** `Retry-After` in seconds: delta-seconds as sent, an HTTP date as the seconds left until it; else undefined. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - nowMs) / 1000));
}
