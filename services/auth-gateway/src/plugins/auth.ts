import { promises as fs } from 'node:fs';
import { ConfigError } from '@tessera/config';
import { AppError } from '@tessera/contracts';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { GatewayConfig } from '../config.ts';
import {
  type ActiveSessionStore,
  createActiveSessionStore,
} from '../modules/sessions/active-sessions.store.ts';
import {
  readKeyFile,
  type SigningKey,
  signingKeyFromPem,
  splitPemBlocks,
  UnsupportedKeyError,
  type VerificationKey,
  verificationKeyFromPem,
} from '../modules/tokens/keys.ts';
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
    const tokens = createTokenService({
      ...(await loadTokenKeys(config)),
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
      accessTokenTtl: config.ACCESS_TOKEN_TTL,
      clockTolerance: config.JWT_CLOCK_TOLERANCE,
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

/**
 * The signing key (JWT_PRIVATE_KEY or JWT_PRIVATE_KEY_FILE, generated in development when missing)
 * and the keys that only verify (JWT_VERIFY_KEYS, JWT_VERIFY_KEY_FILES). Bad key material throws a
 * ConfigError, one line naming the variable (and the file).
 */
export async function loadTokenKeys(
  config: GatewayConfig,
): Promise<{ signingKey: SigningKey; verificationKeys: VerificationKey[] }> {
  const signingKey =
    config.JWT_PRIVATE_KEY !== undefined
      ? parseKey('JWT_PRIVATE_KEY', config.JWT_PRIVATE_KEY, signingKeyFromPem)
      : parseKey(
          `JWT_PRIVATE_KEY_FILE: ${config.JWT_PRIVATE_KEY_FILE}`,
          await readOrFail(`JWT_PRIVATE_KEY_FILE: ${config.JWT_PRIVATE_KEY_FILE}`, () =>
            readKeyFile(config.JWT_PRIVATE_KEY_FILE, config.APP_ENV !== 'production'),
          ),
          signingKeyFromPem,
        );

  const verificationKeys = splitPemBlocks(config.JWT_VERIFY_KEYS ?? '').map((pem, index) =>
    parseKey(`JWT_VERIFY_KEYS: key ${index + 1}`, pem, verificationKeyFromPem),
  );
  const files = (config.JWT_VERIFY_KEY_FILES ?? '')
    .split(',')
    .map((file) => file.trim())
    .filter(Boolean);
  for (const file of files) {
    const where = `JWT_VERIFY_KEY_FILES: ${file}`;
    const blocks = splitPemBlocks(await readOrFail(where, () => fs.readFile(file, 'utf8')));
    if (blocks.length === 0) throw new ConfigError(`Invalid configuration: ${where}: no PEM key in the file`);
    for (const pem of blocks) verificationKeys.push(parseKey(where, pem, verificationKeyFromPem));
  }
  return { signingKey, verificationKeys };
}

function parseKey<K>(where: string, pem: string, parse: (pem: string) => K): K {
  try {
    return parse(pem);
  } catch (error) {
    const reason =
      error instanceof UnsupportedKeyError
        ? `${error.keyType}; use Ed25519 or P-256`
        : parse === signingKeyFromPem
          ? 'not an unencrypted PEM private key'
          : 'not an unencrypted PEM private or public key';
    throw new ConfigError(`Invalid configuration: ${where}: unsupported key (${reason})`);
  }
}

async function readOrFail(where: string, read: () => Promise<string>): Promise<string> {
  try {
    return await read();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`Invalid configuration: ${where}: cannot read the file (${code})`);
  }
}
