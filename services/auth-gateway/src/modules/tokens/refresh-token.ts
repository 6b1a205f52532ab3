import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

/** An opaque refresh token: 256 random bits, base64url. */
export function generateRefreshToken(): string {
  return randomBytes(32).toString('base64url');
}

/** What the database stores instead of the token. */
export function hashRefreshToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

// The successor of a rotated token is sealed with a key only the rotated token can derive, so the
// database never holds a usable token, yet a refresh retried inside the grace window gets the same one.
function sealingKey(previous: string): Buffer {
  return Buffer.from(hkdfSync('sha256', previous, '', 'tessera refresh-token successor', 32));
}

export function sealSuccessor(previous: string, successor: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(previous), iv);
  const body = Buffer.concat([cipher.update(successor, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

export function openSuccessor(previous: string, sealed: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', sealingKey(previous), sealed.subarray(0, 12));
  decipher.setAuthTag(sealed.subarray(12, 28));
  return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
}
