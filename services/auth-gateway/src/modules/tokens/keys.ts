import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type JsonWebKey,
  randomUUID,
} from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

export type SigningAlgorithm = 'EdDSA' | 'ES256';

export interface SigningKey {
  kid: string;
  alg: SigningAlgorithm;
  privateKeyPem: string;
  publicKeyPem: string;
  /** The public half as published in the JWK Set. */
  jwk: PublicJwk;
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
  const alg = algorithmOf(privateKey.asymmetricKeyType, privateKey.asymmetricKeyDetails?.namedCurve);
  const publicKey = createPublicKey(privateKey);
  const publicJwk = publicKey.export({ format: 'jwk' });
  const kid = thumbprint(publicJwk);
  return {
    kid,
    alg,
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    jwk: { ...(publicJwk as { kty: string; crv: string; x: string; y?: string }), kid, alg, use: 'sig' },
  };
}

function algorithmOf(type: string | undefined, curve: string | undefined): SigningAlgorithm {
  if (type === 'ed25519') return 'EdDSA';
  if (type === 'ec' && curve === 'prime256v1') return 'ES256';
  throw new Error(`Unsupported signing key type ${type}${curve ? ` (${curve})` : ''}: use Ed25519 or P-256`);
}

// RFC 7638: SHA-256 over the required members in lexicographic order.
function thumbprint(jwk: JsonWebKey): string {
  const members =
    jwk.kty === 'OKP'
      ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x }
      : { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y };
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}

export function generateSigningKeyPem(): string {
  return generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
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
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || !createIfMissing) throw error;
  }
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${randomUUID()}.tmp`;
  await fs.writeFile(temporary, generateSigningKeyPem(), { mode: 0o600 });
  try {
    await fs.link(temporary, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await fs.unlink(temporary);
  }
  return fs.readFile(file, 'utf8');
}
