import { AppError, type ErrorStatus } from '@tessera/contracts';

/**
 * Every error the gateway answers, by its stable code: the HTTP status (whose canonical message is
 * errors[0] of the envelope) and the detail a client reads after it. The code is what the
 * `Tessera-Error-Code` header of the answer, logs and the `tessera_errors_total` metric name; a
 * client branches on it, never on the words. Codes are kept once published (the README lists them).
 */
export const ERRORS = {
  // The request itself
  VALIDATION_FAILED: {
    status: 400,
    detail: '',
    when: 'a parameter or the body breaks its schema; each detail names one',
  },
  BAD_REQUEST: {
    status: 400,
    detail: '',
    when: 'the request cannot be read (a malformed URL or header, another 4xx of Fastify or Node: its status says which)',
  },
  INVALID_JSON: { status: 400, detail: 'Body is not valid JSON' },
  CONTENT_LENGTH_MISMATCH: { status: 400, detail: 'Content-Length does not match the body' },
  HOST_MISSING: { status: 400, detail: 'An HTTP/1.1 request needs a Host header' },
  ROUTE_NOT_FOUND: { status: 404, detail: '', when: 'no route has this path' },
  METHOD_NOT_ALLOWED: { status: 405, detail: '', when: 'the path answers other methods (`Allow`)' },
  BODY_TOO_LARGE: { status: 413, detail: 'Request body is too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, detail: 'Content-Type must be application/json' },
  UNSUPPORTED_CHARSET: { status: 415, detail: 'JSON must be sent in UTF-8' },
  UNSUPPORTED_ENCODING: {
    status: 415,
    detail: 'The body must be sent uncompressed: no Content-Encoding, no Transfer-Encoding but chunked',
  },
  // Answered from the socket, before any request exists (error-handler's clientErrorHandler).
  REQUEST_TIMEOUT: {
    status: 408,
    detail: '',
    when: 'the request did not arrive whole within `REQUEST_TIMEOUT`',
  },
  HEADERS_TOO_LARGE: { status: 431, detail: '', when: 'the headers take more than 8 KB or 100 lines' },
  RATE_LIMITED: { status: 429, detail: 'Too many requests from this IP address' },

  // Who is calling
  BEARER_MISSING: { status: 401, detail: 'Send Authorization: Bearer <accessToken>' },
  ACCESS_TOKEN_INVALID: { status: 401, detail: 'Access token is invalid or expired' },
  SESSION_ENDED: { status: 401, detail: 'The session of this access token has ended' },

  // Sign-in
  OTP_INVALID: { status: 400, detail: 'Invalid code' },
  OTP_NOT_FOUND: { status: 404, detail: 'No active code for this email; request a new one' },
  OTP_LOCKED: { status: 409, detail: 'Too many wrong attempts; request a new code' },
  SEND_COOLDOWN: { status: 429, detail: 'A code was sent to this email moments ago' },
  SEND_LIMIT_EMAIL: {
    status: 429,
    detail: 'Too many codes were requested for this inbox (an address and its +tag spellings count together)',
  },
  SEND_LIMIT_IP: { status: 429, detail: 'Too many codes were requested from this IP address' },
  VERIFY_LIMIT_EMAIL: { status: 429, detail: 'Too many wrong codes for this email' },
  VERIFY_LIMIT_IP: { status: 429, detail: 'Too many wrong codes from this IP address' },

  // The profile
  PROFILE_INVALID: { status: 400, detail: '', when: 'a profile field breaks a rule; each detail names one' },
  USERNAME_TAKEN: { status: 409, detail: 'username is taken' },
  USERNAME_COOLDOWN: {
    status: 409,
    detail: '',
    when: 'the username was changed too recently; the detail says from when',
  },

  // Account deletion
  DELETION_ALREADY_SCHEDULED: { status: 409, detail: 'The deletion of this account is already scheduled' },
  DELETION_NOT_SCHEDULED: { status: 409, detail: 'No deletion of this account is scheduled' },
  DELETION_DUE: { status: 409, detail: 'The deletion of this account is due and can no longer be cancelled' },
  DELETION_TOO_SOON: {
    status: 429,
    detail: 'The deletion of this account was cancelled too recently to schedule it again',
  },

  // Sessions and refresh tokens
  REFRESH_TOKEN_INVALID: { status: 401, detail: 'Refresh token is invalid, expired or revoked' },
  REFRESH_TOKEN_REUSED: { status: 401, detail: 'Refresh token was already used; the session has ended' },
  REFRESH_TOKEN_FOREIGN: { status: 403, detail: 'The refresh token belongs to another user' },
  REFRESH_TOKEN_NOT_FOUND: { status: 404, detail: 'Unknown refresh token' },
  REFRESH_TOKEN_NOT_ACTIVE: {
    status: 409,
    detail: 'The session of this refresh token has already ended or expired',
  },
  SESSION_NOT_FOUND: { status: 404, detail: 'Unknown session' },
  SESSION_ALREADY_ENDED: { status: 409, detail: 'The session has already ended' },

  // The service
  // A 503 tells when to try again (Retry-After): a dependency or an instance is usually back by then.
  INTERNAL: { status: 500, detail: '', when: 'an unexpected failure (its details are in the log)' },
  DEPENDENCY_UNAVAILABLE: {
    status: 503,
    detail: '',
    retryAfter: 5,
    when: 'Postgres or Redis does not answer, or a table or column this gateway needs is not migrated yet',
  },
  SERVER_BUSY: {
    status: 503,
    detail: 'This gateway has more requests than it can serve; try again',
    retryAfter: 5,
  },
  NOT_READY: {
    status: 503,
    detail: '',
    retryAfter: 5,
    when: "`/health/ready` only: Postgres or Redis does not answer, or the schema is behind the gateway's (its details say which)",
  },
  SHUTTING_DOWN: { status: 503, detail: 'This instance is shutting down; try again', retryAfter: 5 },
} as const satisfies Record<string, CatalogEntry>;

interface CatalogEntry {
  status: ErrorStatus;
  detail: string;
  /** When the error happens, for an entry with no detail of its own (the README's table). */
  when?: string;
  /** Seconds sent as Retry-After unless the error gives its own. */
  retryAfter?: number;
}

export type ErrorCode = keyof typeof ERRORS;

/** An error of the catalog: its detail first, then any `more` details (which field, how long to wait). */
export class GatewayError extends AppError {
  declare readonly code: ErrorCode;

  constructor(code: ErrorCode, more: string[] = [], retryAfter?: number) {
    const entry: CatalogEntry = ERRORS[code];
    super(entry.status, code, entry.detail ? [entry.detail, ...more] : more, retryAfter ?? entry.retryAfter);
  }
}
