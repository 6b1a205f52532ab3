import { errorResponses as Errors, Paginated, PaginationQuery, SuccessEnvelope } from '@tessera/contracts';
import { Type } from 'typebox';

const RefreshTokenBody = Type.Object({ refreshToken: Type.String({ minLength: 1, maxLength: 512 }) });
const Nullable = Type.Union([Type.String(), Type.Null()]);
const bearer = [{ bearerAuth: [] }];

export const TokenPair = Type.Object({
  accessToken: Type.String(),
  refreshToken: Type.String(),
  expiresIn: Type.Integer({ description: 'Seconds until the access token expires' }),
  refreshExpiresIn: Type.Integer({ description: 'Seconds until the refresh token expires' }),
});

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
  response: { 200: SuccessEnvelope(TokenPair), ...Errors(400, 401, 503) },
};

export const revokeTokenSchema = {
  summary: 'End the session a refresh token belongs to',
  security: bearer,
  body: RefreshTokenBody,
  response: { 200: SuccessEnvelope(Revoked), ...Errors(400, 401, 403, 404, 409, 503) },
};

export const logoutSchema = {
  summary: 'End every session of the user',
  security: bearer,
  response: { 200: SuccessEnvelope(Type.Object({ revokedSessions: Type.Integer() })), ...Errors(401, 503) },
};

export const listSessionsSchema = {
  summary: "The user's active sessions, newest first",
  security: bearer,
  querystring: PaginationQuery,
  response: { 200: SuccessEnvelope(Paginated(Session)), ...Errors(400, 401, 503) },
};

export const endSessionSchema = {
  summary: 'End one of the user\'s sessions ("sign out that device")',
  security: bearer,
  params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
  response: { 200: SuccessEnvelope(Revoked), ...Errors(401, 404, 409, 503) },
};
