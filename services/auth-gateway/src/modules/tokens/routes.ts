import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';

const Jwk = Type.Object({
  kty: Type.String(),
  crv: Type.String(),
  x: Type.String(),
  y: Type.Optional(Type.String()),
  kid: Type.String(),
  alg: Type.String(),
  use: Type.String(),
});

/** `GET /.well-known/jwks.json`: a standard JWK Set (not enveloped) so any JWT library can read it. */
const jwksRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/.well-known/jwks.json',
    { schema: { response: { 200: Type.Object({ keys: Type.Array(Jwk) }) } } },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return app.tokens.jwks;
    },
  );
};

export default jwksRoutes;
