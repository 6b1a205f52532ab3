import { AppError } from '@tessera/contracts';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  type ActiveSessionStore,
  createActiveSessionStore,
} from '../modules/sessions/active-sessions.store.ts';
import { readKeyFile, signingKeyFromPem } from '../modules/tokens/keys.ts';
import {
  type AccessClaims,
  createTokenService,
  type TokenService,
} from '../modules/tokens/tokens.service.ts';

declare module 'fastify' {
  interface FastifyInstance {
    tokens: TokenService;
    activeSessions: ActiveSessionStore;
    /** `onRequest` hook of routes that need `Authorization: Bearer <accessToken>`. */
    authenticate: (request: FastifyRequest) => Promise<void>;
  }
  interface FastifyRequest {
    /** The verified access-token claims of an authenticated request. */
    auth: AccessClaims;
  }
}

const BEARER = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/;

/**
 * Who is calling: the signing key, access-token signing and verification, and the check that the
 * token's session is still active (one Redis round trip, no Postgres query).
 */
export default fp(
  async function authPlugin(app) {
    const { config } = app;
    const pem =
      config.JWT_PRIVATE_KEY ??
      (await readKeyFile(config.JWT_PRIVATE_KEY_FILE, config.APP_ENV !== 'production'));
    const tokens = createTokenService({
      signingKey: signingKeyFromPem(pem),
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
      accessTokenTtl: config.ACCESS_TOKEN_TTL,
    });
    const activeSessions = createActiveSessionStore(app.redis);
    app.decorate('tokens', tokens);
    app.decorate('activeSessions', activeSessions);
    app.decorateRequest('auth', null as unknown as AccessClaims);

    app.decorate('authenticate', async (request: FastifyRequest) => {
      const match = BEARER.exec(request.headers.authorization ?? '');
      if (!match?.[1])
        throw new AppError(401, 'BEARER_MISSING', ['Send Authorization: Bearer <accessToken>']);
      const claims = await tokens.verifyAccessToken(match[1]);
      if (!(await activeSessions.isActive(claims.sid))) {
        throw new AppError(401, 'SESSION_ENDED', ['The session of this access token has ended']);
      }
      request.auth = claims;
    });
  },
  { name: 'auth', dependencies: ['config', 'redis'] },
);
