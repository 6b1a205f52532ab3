import { type Static, type TSchema, Type } from 'typebox';
import { type ErrorStatus, STATUS_MESSAGES } from './errors.ts';
import { named } from './named-schema.ts';

/** The envelope every Tessera response uses (BaseResponseDto<T>). */
export type Envelope<T> = {
  isSuccess: boolean;
  statusCode: number;
  data: T | null;
  errors: string[];
  timestamp: string;
};

/** Schema of a successful response carrying `data`. */
export const SuccessEnvelope = <T extends TSchema>(data: T) =>
  Type.Object(
    {
      isSuccess: Type.Literal(true),
      statusCode: Type.Integer(),
      data,
      errors: Type.Array(Type.String(), { maxItems: 0 }),
      timestamp: Type.String({ format: 'date-time' }),
    },
    { additionalProperties: false },
  );

/** Schema of every error response. */
export const ErrorEnvelope = named(
  'ErrorEnvelope',
  Type.Object(
    {
      isSuccess: Type.Literal(false),
      statusCode: Type.Integer(),
      data: Type.Null(),
      errors: Type.Array(Type.String(), { minItems: 1 }),
      timestamp: Type.String({ format: 'date-time' }),
    },
    { additionalProperties: false },
  ),
  'Every error answer: `errors[0]` is the canonical message of the status, further entries are details.',
);
export type ErrorEnvelope = Static<typeof ErrorEnvelope>;

/** On every error answer: its stable code, for clients to branch on (`headers` is @fastify/swagger's). */
const ERROR_CODE = {
  'Tessera-Error-Code': {
    type: 'string',
    pattern: '^[A-Z][A-Z0-9_]*$',
    description:
      "The error's stable code (`OTP_INVALID`, `SESSION_ENDED`, …: the README lists them): what to branch on, not the words of `errors`",
  },
};
/** The header that tells a client when to try again, on every 429 and 503. */
const RETRY_AFTER = {
  'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before trying again' },
};
const WWW_AUTHENTICATE = {
  'WWW-Authenticate': {
    type: 'string',
    description:
      'The challenge (RFC 6750): `Bearer`, or `Bearer error="invalid_token"` when the token sent was refused',
  },
};

/**
 * What each error status means wherever it is answered, for the document's response descriptions: the
 * canonical message (`errors[0]`), then when it happens. A route says more with `[status, description]`.
 */
const ERROR_DESCRIPTIONS: Record<ErrorStatus, string> = {
  400: `${STATUS_MESSAGES[400]}: a parameter or the body breaks a rule; the details after errors[0] name each one`,
  401: `${STATUS_MESSAGES[401]}: the access token is missing, malformed or expired, or its session has ended`,
  403: `${STATUS_MESSAGES[403]}`,
  404: `${STATUS_MESSAGES[404]}`,
  405: `${STATUS_MESSAGES[405]}: the Allow header names the methods this path answers`,
  408: `${STATUS_MESSAGES[408]}: the request took too long to arrive`,
  409: `${STATUS_MESSAGES[409]}`,
  413: `${STATUS_MESSAGES[413]}: the body is larger than the gateway accepts`,
  414: `${STATUS_MESSAGES[414]}`,
  415: `${STATUS_MESSAGES[415]}: a body must be application/json, in UTF-8`,
  429: `${STATUS_MESSAGES[429]}: a rate limit is reached; try again after Retry-After seconds`,
  431: `${STATUS_MESSAGES[431]}`,
  500: `${STATUS_MESSAGES[500]}: an unexpected failure of the gateway`,
  503: `${STATUS_MESSAGES[503]}: a dependency does not answer or this instance is shutting down; try again after Retry-After seconds`,
};

/** An error status a route answers, alone or with what it means on that route. */
export type ErrorResponse = ErrorStatus | readonly [status: ErrorStatus, description: string];

/**
 * Route response schemas for the error statuses a route can answer, each described by its canonical
 * message and, given `[status, description]`, what it means on that route.
 */
export const errorResponses = (...statuses: ErrorResponse[]): Record<number, typeof ErrorEnvelope> =>
  Object.fromEntries(
    statuses.map((entry) => {
      const [status, meaning] = typeof entry === 'number' ? [entry] : entry;
      return [
        status,
        {
          ...ErrorEnvelope,
          description: meaning ? `${STATUS_MESSAGES[status]}: ${meaning}` : ERROR_DESCRIPTIONS[status],
          headers: {
            ...ERROR_CODE,
            ...((status === 429 || status === 503) && RETRY_AFTER),
            ...(status === 401 && WWW_AUTHENTICATE),
          },
        },
      ];
    }),
  );

export function success<T>(data: T, now: Date, statusCode = 200) {
  return { isSuccess: true as const, statusCode, data, errors: [] as never[], timestamp: now.toISOString() };
}

export function failure(statusCode: number, errors: [string, ...string[]], now: Date): ErrorEnvelope {
  return { isSuccess: false, statusCode, data: null, errors, timestamp: now.toISOString() };
}
