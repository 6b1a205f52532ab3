import { AppError } from '@tessera/contracts';
import { createSigner, createVerifier } from 'fast-jwt';
import type { SigningKey } from './keys.ts';

export interface AccessClaims {
  sub: string;
  sid: string;
  roles: string[];
}

export interface TokenServiceOptions {
  signingKey: SigningKey;
  issuer: string;
  audience: string;
  accessTokenTtl: number;
}

export type TokenService = ReturnType<typeof createTokenService>;

/** Signs and verifies access tokens: asymmetric, `kid` in the header, issuer and audience pinned. */
export function createTokenService({ signingKey, issuer, audience, accessTokenTtl }: TokenServiceOptions) {
  const publicKeys = new Map([[signingKey.kid, signingKey.publicKeyPem]]);
  const sign = createSigner({
    key: signingKey.privateKeyPem,
    algorithm: signingKey.alg,
    kid: signingKey.kid,
    iss: issuer,
    aud: audience,
    expiresIn: accessTokenTtl * 1000,
  });
  const verify = createVerifier({
    // Only the configured asymmetric algorithm: `none`, HMAC and unknown `kid`s are rejected.
    algorithms: [signingKey.alg],
    key: async ({ header }: { header: { kid?: unknown } }) => {
      const key = typeof header.kid === 'string' ? publicKeys.get(header.kid) : undefined;
      if (!key) throw new Error('unknown kid');
      return key;
    },
    allowedIss: issuer,
    allowedAud: audience,
    requiredClaims: ['iss', 'aud', 'sub', 'sid', 'iat', 'exp'],
    // Identical tokens verify from cache until their own expiry.
    cache: 10_000,
  });

  return {
    jwks: { keys: [signingKey.jwk] },

    /** Deterministic for EdDSA: the same claims and `issuedAt` give the same token. */
    signAccessToken(claims: AccessClaims, issuedAt: Date): string {
      return sign({ ...claims, iat: Math.floor(issuedAt.getTime() / 1000) });
    },

    async verifyAccessToken(token: string): Promise<AccessClaims> {
      try {
        const payload = await verify(token);
        if (typeof payload.sid !== 'string' || typeof payload.sub !== 'string') throw new Error('claims');
        return {
          sub: payload.sub,
          sid: payload.sid,
          roles: Array.isArray(payload.roles) ? payload.roles : [],
        };
      } catch {
        throw new AppError(401, 'ACCESS_TOKEN_INVALID', ['Access token is invalid or expired']);
      }
    },
  };
}
