import { meter } from '@tessera/telemetry';
import { createSigner, createVerifier } from 'fast-jwt';
import type { Clock } from '../../clock.ts';
import { GatewayError } from '../../errors.ts';
import { isUuid } from '../../uuid.ts';
import type { SigningKey, VerificationKey } from './keys.ts';

export interface AccessClaims {
  sub: string;
  sid: string;
  roles: string[];
}

export interface TokenServiceOptions {
  /** Signs new access tokens, and verifies them. */
  signingKey: SigningKey;
  /** Keys that only verify: the previous (or the next) signing keys of a rotation. */
  verificationKeys?: readonly VerificationKey[];
  issuer: string;
  audience: string;
  accessTokenTtl: number;
  /** Seconds of clock difference forgiven when checking `exp` (and `nbf`). */
  clockTolerance?: number;
  /** What `iat` is signed from and `exp`/`nbf` are checked against. */
  clock: Clock;
}

export type TokenService = ReturnType<typeof createTokenService>;

const accessTokensRefused = meter.createCounter('tessera.access_tokens.refused', {
  description:
    'Access tokens refused, by reason: expired, malformed, key (unknown kid or algorithm), signature, claims, lifetime (issued in the future or living longer than ACCESS_TOKEN_TTL)',
});
const REASONS = ['expired', 'malformed', 'key', 'signature', 'claims', 'lifetime'] as const;
// Every series from the start, so that rate() and alerts see the first one too.
for (const reason of REASONS) accessTokensRefused.add(0, { reason });

/** fast-jwt's refusals by reason; any other (a claim's value, a missing claim) is `claims`. */
const VERIFY_REFUSALS: Record<string, (typeof REASONS)[number]> = {
  FAST_JWT_MALFORMED: 'malformed',
  FAST_JWT_INVALID_TYPE: 'malformed',
  FAST_JWT_INVALID_PAYLOAD: 'malformed',
  FAST_JWT_MISSING_SIGNATURE: 'malformed',
  FAST_JWT_KEY_FETCHING_ERROR: 'key',
  FAST_JWT_INVALID_ALGORITHM: 'key',
  FAST_JWT_INVALID_SIGNATURE: 'signature',
};

/** A refused access token, counted by why: a rise of `signature` or `key` is someone forging them. */
function refused(reason: (typeof REASONS)[number]): GatewayError {
  accessTokensRefused.add(1, { reason });
  return new GatewayError('ACCESS_TOKEN_INVALID');
}

/**
 * Signs and verifies access tokens: asymmetric, `kid` in the header, issuer and audience pinned.
 * Every key verifies only its own algorithm; the JWK Set lists them all, the signing key first.
 */
export function createTokenService({
  signingKey,
  verificationKeys = [],
  issuer,
  audience,
  accessTokenTtl,
  clockTolerance = 0,
  clock,
}: TokenServiceOptions) {
  // By kid; a key given twice (the signing key among the verification keys) is listed once.
  const keys = new Map<string, VerificationKey>();
  for (const key of [signingKey, ...verificationKeys]) if (!keys.has(key.kid)) keys.set(key.kid, key);
  const sign = createSigner({
    key: signingKey.privateKeyPem,
    algorithm: signingKey.alg,
    kid: signingKey.kid,
    iss: issuer,
    aud: audience,
    expiresIn: accessTokenTtl * 1000,
  });
  const verify = createVerifier({
    // Only the configured asymmetric algorithms, and for each kid only its key's own: `none`, HMAC,
    // unknown `kid`s and an `alg` that is not the key's are rejected.
    algorithms: [...new Set([...keys.values()].map((key) => key.alg))],
    key: async ({ header }: { header: { kid?: unknown; alg?: unknown } }) => {
      const key = typeof header.kid === 'string' ? keys.get(header.kid) : undefined;
      if (!key) throw new Error('unknown kid');
      if (header.alg !== key.alg) throw new Error('algorithm of another key');
      return key.publicKeyPem;
    },
    allowedIss: issuer,
    allowedAud: audience,
    requiredClaims: ['iss', 'aud', 'sub', 'sid', 'iat', 'exp'],
    // The times are checked below against the gateway's clock, which fast-jwt cannot be given.
    ignoreExpiration: true,
    ignoreNotBefore: true,
    // Identical tokens verify from cache (signature and claims; the times are checked on every use).
    cache: 10_000,
  });

  /**
   * Why the token's times fail, if they do: issued by now and living no longer than
   * ACCESS_TOKEN_TTL, as this gateway signs them (else `lifetime`: a token forged with a leaked key
   * cannot name a lifetime of its own that outlasts the key's rotation), with `exp` (and `nbf`, if
   * present) holding at the clock's now, give or take the tolerance (else `expired`).
   */
  function timesRefused({ iat, exp, nbf }: { iat?: unknown; exp?: unknown; nbf?: unknown }) {
    const now = clock.now().getTime() / 1000;
    if (typeof iat !== 'number' || typeof exp !== 'number') return 'claims';
    if (iat > now + clockTolerance || exp - iat > accessTokenTtl) return 'lifetime';
    if (now > exp + clockTolerance) return 'expired';
    if (nbf !== undefined && !(typeof nbf === 'number' && now >= nbf - clockTolerance)) return 'expired';
    return undefined;
  }

  return {
    jwks: { keys: [...keys.values()].map((key) => key.jwk) },

    /** Deterministic for EdDSA: the same claims and `issuedAt` give the same token. */
    signAccessToken(claims: AccessClaims, issuedAt: Date): string {
      return sign({ ...claims, iat: Math.floor(issuedAt.getTime() / 1000) });
    },

    async verifyAccessToken(token: string): Promise<AccessClaims> {
      const payload = await verify(token).catch((error: { code?: string }) => {
        throw refused(VERIFY_REFUSALS[error.code ?? ''] ?? 'claims');
      });
      const times = timesRefused(payload);
      if (times) throw refused(times);
      // Ids Postgres can be asked about: a token of another issuer's ids sharing the key is refused too.
      if (!isUuid(payload.sid) || !isUuid(payload.sub)) throw refused('claims');
      return {
        sub: payload.sub,
        sid: payload.sid,
        roles: Array.isArray(payload.roles) ? payload.roles : [],
      };
    },
  };
}
