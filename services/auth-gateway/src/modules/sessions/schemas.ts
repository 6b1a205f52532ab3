import { errorResponses as Errors, named, Paginated, PaginationQuery } from '@tessera/contracts';
import { type Static, Type } from 'typebox';
import { RotatedTokenPair, TOKEN_PAIR_EXAMPLE } from '../tokens/schemas.ts';
import type { EndedSession } from './end.ts';
import type { SessionRow } from './sessions.repository.ts';

const RefreshTokenBody = named(
  'RefreshTokenBody',
  Type.Object(
    { refreshToken: Type.String({ minLength: 1, maxLength: 512 }) },
    { examples: [{ refreshToken: TOKEN_PAIR_EXAMPLE.refreshToken }] },
  ),
  'A refresh token, to exchange for a new pair or to end its session',
);
const Nullable = Type.Union([Type.String(), Type.Null()]);
const bearer = [{ bearerAuth: [] }];
const tags = ['auth'];

const Revoked = named(
  'RevokedSession',
  Type.Object(
    { _id: Type.String(), revokedAt: Type.String({ format: 'date-time' }) },
    { examples: [{ _id: '9e1c7b4a-3d2f-4a6e-8b1c-5f7d9e0a2b3c', revokedAt: '2026-11-23T10:15:00.000Z' }] },
  ),
  'A session that has just ended: its `_id` and when',
);

const Session = named(
  'Session',
  Type.Object({
    _id: Type.String(),
    createdAt: Type.String({ format: 'date-time' }),
    lastUsedAt: Type.String({ format: 'date-time', description: 'Sign-in or last refresh' }),
    expiresAt: Type.String({ format: 'date-time' }),
    ipAddress: Nullable,
    userAgent: Nullable,
    current: Type.Boolean({ description: 'The session of the calling access token' }),
  }),
  "One of the user's active sessions (a signed-in device)",
);

export const refreshTokenSchema = {
  operationId: 'refreshToken',
  tags,
  summary: 'Exchange a refresh token for a new token pair (the presented one stops working)',
  description: 'No access token: the refresh token is the credential.',
  security: [],
  body: RefreshTokenBody,
  response: {
    200: { ...RotatedTokenPair, description: 'Refreshed: a new token pair for the same session' },
    ...Errors(400, [401, 'the refresh token is unknown, expired or revoked, or was already used'], 503),
  },
};

export const revokeTokenSchema = {
  operationId: 'revokeToken',
  tags,
  summary: 'End the session a refresh token belongs to',
  security: bearer,
  body: RefreshTokenBody,
  response: {
    200: { ...Revoked, description: 'The session of that refresh token has ended' },
    ...Errors(
      400,
      401,
      [403, 'the refresh token belongs to another user'],
      [404, 'unknown refresh token'],
      [
        409,
        'the session of the refresh token has already ended or expired (a token rotated away ends its session if that is still open)',
      ],
      503,
    ),
  },
};

export const logoutSchema = {
  operationId: 'logout',
  tags,
  summary: 'End every session of the user',
  security: bearer,
  response: {
    200: named(
      'LogoutResult',
      Type.Object(
        { revokedSessions: Type.Integer({ description: 'How many active sessions were ended' }) },
        {
          description: 'Signed out everywhere: every active session of the user has ended',
          examples: [{ revokedSessions: 3 }],
        },
      ),
      'What signing out everywhere ended',
    ),
    ...Errors(401, 503),
  },
};

export const listSessionsSchema = {
  operationId: 'listSessions',
  tags,
  summary: "The user's active sessions, newest first",
  security: bearer,
  querystring: PaginationQuery,
  response: {
    200: named(
      'SessionPage',
      Paginated(Session, {
        description: "A page of the user's active sessions",
        examples: [
          {
            list: [
              {
                _id: '9e1c7b4a-3d2f-4a6e-8b1c-5f7d9e0a2b3c',
                createdAt: '2026-11-23T09:58:12.000Z',
                lastUsedAt: '2026-11-23T10:13:40.000Z',
                expiresAt: '2026-12-23T10:13:40.000Z',
                ipAddress: '203.0.113.7',
                userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 19_1 like Mac OS X) AppleWebKit/605.1.15',
                current: true,
              },
              {
                _id: '4b8f2d6e-1a3c-4e5f-9d7b-0c2e4a6f8b1d',
                createdAt: '2026-11-20T14:01:45.000Z',
                lastUsedAt: '2026-11-22T19:30:02.000Z',
                expiresAt: '2026-12-22T19:30:02.000Z',
                ipAddress: '198.51.100.24',
                userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/142.0.0.0 Safari/537.36',
                current: false,
              },
            ],
            pagination: {
              currentPage: 1,
              totalPages: 1,
              totalItems: 2,
              itemsPerPage: 10,
              hasNextPage: false,
              hasPrevPage: false,
            },
          },
        ],
      }),
      "A page of the user's active sessions",
    ),
    ...Errors(400, 401, 503),
  },
};

export const endSessionSchema = {
  operationId: 'endSession',
  tags,
  summary: 'End one of the user\'s sessions ("sign out that device")',
  security: bearer,
  params: Type.Object({ id: Type.String({ maxLength: 64, description: "The session's `_id`" }) }),
  response: {
    200: { ...Revoked, description: 'The session has ended' },
    ...Errors(
      401,
      [404, "unknown session, or another user's"],
      [409, 'the session has already ended'],
      // Fastify's router refuses a path parameter over 100 characters before the schema's 400.
      [414, 'the id is longer than 100 characters'],
      503,
    ),
  },
};

export function toRevoked({ sessionId, revokedAt }: EndedSession): Static<typeof Revoked> {
  return { _id: sessionId, revokedAt: revokedAt.toISOString() };
}

export function toSession(row: SessionRow, currentSessionId: string): Static<typeof Session> {
  return {
    _id: row.id,
    createdAt: row.createdAt.toISOString(),
    lastUsedAt: row.lastUsedAt.toISOString(),
    expiresAt: row.expiresAt.toISOString(),
    ipAddress: row.ipAddress,
    userAgent: row.userAgent,
    current: row.id === currentSessionId,
  };
}
