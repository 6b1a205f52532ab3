import { named } from '@tessera/contracts';
import { type Static, Type } from 'typebox';

/** What sign-in hands a client (default lifetimes, issuer and audience): the access token and a refresh token. */
export const TOKEN_PAIR_EXAMPLE = {
  accessToken:
    'eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCIsImtpZCI6IjZ0d1NfYkUifQ.eyJzdWIiOiIwYjZkM2YyZS01YzFhLTRlOGItOWY3ZC0yYTRjNmU4ZjBhMWIiLCJzaWQiOiI5ZTFjN2I0YS0zZDJmLTRhNmUtOGIxYy01ZjdkOWUwYTJiM2MiLCJyb2xlcyI6WyJ1c2VyIl0sImlhdCI6MTc5NTQyNTg5MiwiZXhwIjoxNzk1NDI5NDkyLCJpc3MiOiJ0ZXNzZXJhIiwiYXVkIjoidGVzc2VyYSJ9.c2lnbmF0dXJl',
  refreshToken: 'Vq3m9XkP2sLw8YtB4nHc7RzJ6fGd1aEu0oKiNyMb5Ts',
  expiresIn: 3600,
  refreshExpiresIn: 2_592_000,
};

/** What refreshing that pair hands back: both tokens new, the session the same. */
const ROTATED_PAIR_EXAMPLE = {
  accessToken:
    'eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCIsImtpZCI6IjZ0d1NfYkUifQ.eyJzdWIiOiIwYjZkM2YyZS01YzFhLTRlOGItOWY3ZC0yYTRjNmU4ZjBhMWIiLCJzaWQiOiI5ZTFjN2I0YS0zZDJmLTRhNmUtOGIxYy01ZjdkOWUwYTJiM2MiLCJyb2xlcyI6WyJ1c2VyIl0sImlhdCI6MTc5NTQyODAwMCwiZXhwIjoxNzk1NDMxNjAwLCJpc3MiOiJ0ZXNzZXJhIiwiYXVkIjoidGVzc2VyYSJ9.c2lnbmF0dXJl',
  refreshToken: 'InW4KVa0ML7g-39JHb67i5BkYqlTitPLTpTX2ko3ehQ',
  expiresIn: 3600,
  refreshExpiresIn: 2_592_000,
};

const tokenPairProperties = {
  accessToken: Type.String({ description: 'JWT to send as `Authorization: Bearer <accessToken>`' }),
  refreshToken: Type.String({ description: 'Opaque; exchanged for a new pair once, at the refresh route' }),
  expiresIn: Type.Integer({ description: 'Seconds until the access token expires' }),
  refreshExpiresIn: Type.Integer({ description: 'Seconds until the refresh token expires' }),
};
const TOKEN_PAIR = 'An access token and a refresh token, with their lifetimes in seconds';
// One shape under one name: the two differ only in the example the document shows.
export const TokenPair = named(
  'TokenPair',
  Type.Object(tokenPairProperties, { examples: [TOKEN_PAIR_EXAMPLE] }),
  TOKEN_PAIR,
);
export const RotatedTokenPair = named(
  'TokenPair',
  Type.Object(tokenPairProperties, { examples: [ROTATED_PAIR_EXAMPLE] }),
  TOKEN_PAIR,
);
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
  operationId: 'getJwks',
  tags: ['auth'],
  security: [],
  summary: 'The public keys that verify access tokens (a standard JWK Set, not enveloped)',
  response: {
    200: Type.Object(
      { keys: Type.Array(Jwk) },
      {
        description:
          'The JWK Set: every key whose access tokens may still be valid (cacheable for 5 minutes)',
        examples: [
          {
            keys: [
              {
                kty: 'OKP',
                crv: 'Ed25519',
                x: 'm4L2o6cJ7sFfE0Qb2cQ9nX1uYtR3wVzK8pHdA5gLsIo',
                kid: '6twS_bE',
                alg: 'EdDSA',
                use: 'sig',
              },
            ],
          },
        ],
      },
    ),
  },
};
