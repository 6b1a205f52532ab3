import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { PublicJwk } from './keys.ts';
import { jwksSchema } from './schemas.ts';

/** `GET /.well-known/jwks.json`: a standard JWK Set (not enveloped) so any JWT library can read it. */
const jwksRoutes: FastifyPluginAsyncTypebox<{ jwks: { keys: PublicJwk[] } }> = async (app, { jwks }) => {
  app.get(
    '/.well-known/jwks.json',
    { schema: jwksSchema, config: { envelope: false } },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return jwks;
    },
  );
};

export default jwksRoutes;
