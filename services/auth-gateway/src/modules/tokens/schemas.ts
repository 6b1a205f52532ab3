import { type Static, Type } from 'typebox';

/** What sign-in and refresh hand a client: the access token and the next refresh token. */
export const TokenPair = Type.Object({
  accessToken: Type.String({ description: 'JWT to send as `Authorization: Bearer <accessToken>`' }),
  refreshToken: Type.String({ description: 'Opaque; exchanged for a new pair once, at the refresh route' }),
  expiresIn: Type.Integer({ description: 'Seconds until the access token expires' }),
  refreshExpiresIn: Type.Integer({ description: 'Seconds until the refresh token expires' }),
});
export type TokenPair = Static<typeof TokenPair>;

const Jwk = Type.Object({
  kty: Type.String(),
  crv: Type.String(),
  x: Type.String(),
  y: Type.Optional(Type.String()),
  kid: Type.String(),
  alg: Type.String(),
  use: Type.String(),
});

export const jwksSchema = {
  summary: 'The public keys that verify access tokens (a standard JWK Set, not enveloped)',
  response: { 200: Type.Object({ keys: Type.Array(Jwk) }) },
};
