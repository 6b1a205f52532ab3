import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../errors.ts';

/** Who is calling, as the verified access token says. */
export interface Caller {
  /** The user's `_id`. */
  sub: string;
  /** The session's `_id`. */
  sid: string;
  roles: string[];
}

declare module 'fastify' {
  interface FastifyInstance {
    /** `onRequest` hook of routes that need `Authorization: Bearer <accessToken>`. */
    authenticate: (request: FastifyRequest) => Promise<void>;
  }
  interface FastifyRequest {
    /** The caller of an authenticated request. */
    auth: Caller;
  }
}

// The scheme's name is case-insensitive (RFC 9110 §11.1): `bearer` and `BEARER` are `Bearer` too;
// one or more spaces follow it (§11.4).
const BEARER = /^Bearer +(.+)$/i;

/**
 * The `authenticate` hook: reads the bearer token and asks `verify` (the token's signature and
 * claims, and whether its session is still active) who is calling.
 */
export default fp<{ verify: (accessToken: string) => Promise<Caller> }>(
  async function authPlugin(app, { verify }) {
    app.decorateRequest('auth', null as unknown as Caller);
    app.decorate('authenticate', async (request: FastifyRequest) => {
      const token = BEARER.exec(request.headers.authorization ?? '')?.[1];
      if (token === undefined) throw new GatewayError('BEARER_MISSING');
      // Whatever was sent as the token, even no JWT at all, is refused by `verify` as an invalid one.
      request.auth = await verify(token);
    });
  },
  { name: 'auth' },
);
