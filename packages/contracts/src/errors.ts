/** The canonical first message of every error status (errors[0] of the envelope). */
export const STATUS_MESSAGES = {
  400: 'Validation failed',
  401: 'Authentication required',
  403: 'Insufficient permissions',
  404: 'Resource not found',
  405: 'Method not allowed',
  408: 'Request timeout',
  409: 'Resource already exists or cannot be changed in its current state',
  413: 'Payload too large',
  414: 'URI too long',
  415: 'Unsupported media type',
  429: 'Too many requests',
  431: 'Request header fields too large',
  500: 'Internal server error',
  503: 'Service unavailable',
} as const;

export type ErrorStatus = keyof typeof STATUS_MESSAGES;

export function statusMessage(status: number): string {
  return (
    STATUS_MESSAGES[status as ErrorStatus] ?? (status >= 500 ? STATUS_MESSAGES[500] : STATUS_MESSAGES[400])
  );
}

/**
 * The one error type of Tessera: an HTTP status, a stable machine code (for logs and clients that
 * branch on it) and human-readable details that become errors[1..] of the envelope.
 */
export class AppError extends Error {
  readonly statusCode: ErrorStatus;
  readonly code: string;
  readonly details: string[];
  /** Seconds until the client may retry; sent as `Retry-After` on 429 and 503. */
  readonly retryAfter: number | undefined;

  constructor(statusCode: ErrorStatus, code: string, details: string[] = [], retryAfter?: number) {
    super(details[0] ?? STATUS_MESSAGES[statusCode]);
    this.name = 'AppError';
    this.statusCode = statusCode;
    this.code = code;
    this.details = details;
    this.retryAfter = retryAfter;
  }
}

/**
 * A dependency (Postgres, Redis, the mail server) cannot answer now: the request may be retried
 * later. Clients raise it for outages, so an outage (503) is told from a bug (500) by its class.
 */
export class DependencyUnavailableError extends Error {
  override name = 'DependencyUnavailableError';
  readonly dependency: string;

  constructor(dependency: string, options?: ErrorOptions) {
    super(`${dependency} is unavailable`, options);
    this.dependency = dependency;
  }
}

/**
 * A dependency answers, but every connection to it is in use and the wait for one ran out (more
 * requests than the service can serve): a 503 like an outage, told apart for clients and operators.
 */
export class DependencyBusyError extends DependencyUnavailableError {
  override name = 'DependencyBusyError';
  override message = `${this.dependency} is busy`;
}
