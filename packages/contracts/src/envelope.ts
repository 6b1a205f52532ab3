import { type Static, type TSchema, Type } from 'typebox';
import { type ErrorStatus, STATUS_MESSAGES } from './errors.ts';

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
export const ErrorEnvelope = Type.Object(
  {
    isSuccess: Type.Literal(false),
    statusCode: Type.Integer(),
    data: Type.Null(),
    errors: Type.Array(Type.String(), { minItems: 1 }),
    timestamp: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);
export type ErrorEnvelope = Static<typeof ErrorEnvelope>;

/** The header that tells a client when to try again, on every 429 and 503 (`headers` is @fastify/swagger's). */
const RETRY_AFTER = {
  headers: {
    'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before trying again' },
  },
};

/** Route response schemas for the error statuses a route can answer, each described by its canonical message. */
export const errorResponses = (...statuses: ErrorStatus[]): Record<number, typeof ErrorEnvelope> =>
  Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        ...ErrorEnvelope,
        description: STATUS_MESSAGES[status],
        ...((status === 429 || status === 503) && RETRY_AFTER),
      },
    ]),
  );

export function success<T>(data: T, now: Date, statusCode = 200) {
  return { isSuccess: true as const, statusCode, data, errors: [] as never[], timestamp: now.toISOString() };
}

export function failure(statusCode: number, errors: [string, ...string[]], now: Date): ErrorEnvelope {
  return { isSuccess: false, statusCode, data: null, errors, timestamp: now.toISOString() };
}
