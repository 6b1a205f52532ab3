import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type JsonWebKey,
  type KeyObject,
  randomUUID,
} from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

export type SigningAlgorithm = 'EdDSA' | 'ES256';

/** A key that verifies access tokens: the public half only. */
export interface VerificationKey {
  kid: string;
  alg: SigningAlgorithm;
  publicKeyPem: string;
  /** The public half as published in the JWK Set. */
  jwk: PublicJwk;
}

export interface SigningKey extends VerificationKey {
  privateKeyPem: string;
}

export interface PublicJwk {
  kty: string;
  crv: string;
  x: string;
  y?: string;
  kid: string;
  alg: SigningAlgorithm;
  use: 'sig';
}

/** Reads a PEM private key (Ed25519 or P-256) and derives its public JWK and RFC 7638 thumbprint `kid`. */
export function signingKeyFromPem(pem: string): SigningKey {
  const privateKey = createPrivateKey(pem);
  return {
    ...publicPart(createPublicKey(privateKey)),
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
  };
}

/**
 * Reads one PEM key that only verifies: a public key (SPKI) or a private key, of which only the
 * public half is kept.
 */
export function verificationKeyFromPem(pem: string): VerificationKey {
  return publicPart(createPublicKey(pem));
}

function publicPart(publicKey: KeyObject): VerificationKey {
  const alg = algorithmOf(publicKey.asymmetricKeyType, publicKey.asymmetricKeyDetails?.namedCurve);
  const publicJwk = publicKey.export({ format: 'jwk' });
  const kid = thumbprint(publicJwk);
  return {
    kid,
    alg,
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    jwk: { ...(publicJwk as { kty: string; crv: string; x: string; y?: string }), kid, alg, use: 'sig' },
  };
}

/**
 * Splits PEM text holding several keys into one block per key, on `-----BEGIN` boundaries. The
 * `EC PARAMETERS` block OpenSSL writes before a P-256 key is dropped; anything else that is not a
 * key stays in, so that reading it fails loudly.
 */
export function splitPemBlocks(text: string): string[] {
  return text
    .split(/(?=-----BEGIN )/)
    .map((block) => block.trim())
    .filter((block) => block && !block.startsWith('-----BEGIN EC PARAMETERS-----'));
}

/** A well-formed key of a type that cannot sign access tokens (RSA, another curve). */
export class UnsupportedKeyError extends Error {
  override name = 'UnsupportedKeyError';
  readonly keyType: string;
  constructor(keyType: string) {
    super(`Unsupported signing key type ${keyType}: use Ed25519 or P-256`);
    this.keyType = keyType;
  }
}

function algorithmOf(type: string | undefined, curve: string | undefined): SigningAlgorithm {
  if (type === 'ed25519') return 'EdDSA';
  if (type === 'ec' && curve === 'prime256v1') return 'ES256';
  throw new UnsupportedKeyError(`${type}${curve ? ` (${curve})` : ''}`);
}

// RFC 7638: SHA-256 over the required members in lexicographic order.
function thumbprint(jwk: JsonWebKey): string {
  const members =
    jwk.kty === 'OKP'
      ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x }
      : { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y };
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}

/** A new private key in PKCS #8 PEM: Ed25519 (EdDSA) by default, or P-256 (ES256). */
export function generateSigningKeyPem(alg: SigningAlgorithm = 'EdDSA'): string {
  const { privateKey } =
    alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519');
  return privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
}

/** The key file was missing and could not be created there (a read-only or full disk, no folder). */
export class KeyFileNotCreatedError extends Error {
  override name = 'KeyFileNotCreatedError';
  readonly code: string;
  constructor(cause: unknown) {
    const code = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
    super(`cannot create the file (${code})`, { cause });
    this.code = code;
  }
}

/**
 * Reads the key file; when it is missing and `createIfMissing` (development), creates it once.
 * Several processes starting together agree on one key: the file appears atomically (link of a
 * finished temporary file) and whoever loses the race reads the winner's key.
 */
export async function readKeyFile(file: string, createIfMissing: boolean): Promise<string> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (error) {
    // Missing, or a folder on its way is a file (which creating it will meet).
    const code = (error as NodeJS.ErrnoException).code;
    if ((code !== 'ENOENT' && code !== 'ENOTDIR') || !createIfMissing) throw error;
  }
  const temporary = `${file}.${randomUUID()}.tmp`;
  try {
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await fs.writeFile(temporary, generateSigningKeyPem(), { mode: 0o600 });
  } catch (error) {
    await fs.rm(temporary, { force: true }).catch(() => {});
    throw new KeyFileNotCreatedError(error);
  }
  try {
    await fs.link(temporary, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new KeyFileNotCreatedError(error);
  } finally {
    await fs.unlink(temporary);
  }
  return fs.readFile(file, 'utf8');
}
