import { errorResponses as Errors, Paginated, PaginationQuery } from '@tessera/contracts';
import { type Static, Type } from 'typebox';
import { TokenPair } from '../tokens/schemas.ts';
import type { EndedSession } from './end.ts';
import type { SessionRow } from './sessions.repository.ts';

const RefreshTokenBody = Type.Object({ refreshToken: Type.String({ minLength: 1, maxLength: 512 }) });
const Nullable = Type.Union([Type.String(), Type.Null()]);
const bearer = [{ bearerAuth: [] }];

const Revoked = Type.Object({ _id: Type.String(), revokedAt: Type.String({ format: 'date-time' }) });

const Session = Type.Object({
  _id: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  lastUsedAt: Type.String({ format: 'date-time', description: 'Sign-in or last refresh' }),
  expiresAt: Type.String({ format: 'date-time' }),
  ipAddress: Nullable,
  userAgent: Nullable,
  current: Type.Boolean({ description: 'The session of the calling access token' }),
});

export const refreshTokenSchema = {
  summary: 'Exchange a refresh token for a new token pair (the presented one stops working)',
  body: RefreshTokenBody,
  response: { 200: TokenPair, ...Errors(400, 401, 503) },
};

export const revokeTokenSchema = {
  summary: 'End the session a refresh token belongs to',
  security: bearer,
  body: RefreshTokenBody,
  response: { 200: Revoked, ...Errors(400, 401, 403, 404, 409, 503) },
};

export const logoutSchema = {
  summary: 'End every session of the user',
  security: bearer,
  response: { 200: Type.Object({ revokedSessions: Type.Integer() }), ...Errors(401, 503) },
};

export const listSessionsSchema = {
  summary: "The user's active sessions, newest first",
  security: bearer,
  querystring: PaginationQuery,
  response: { 200: Paginated(Session), ...Errors(400, 401, 503) },
};

export const endSessionSchema = {
  summary: 'End one of the user\'s sessions ("sign out that device")',
  security: bearer,
  params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
  response: { 200: Revoked, ...Errors(401, 404, 409, 503) },
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
