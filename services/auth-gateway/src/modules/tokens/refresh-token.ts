import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

/** An opaque refresh token: 256 random bits, base64url. */
export function generateRefreshToken(): string {
  return randomBytes(32).toString('base64url');
}

/** What the database stores instead of the token. */
export function hashRefreshToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

export type SuccessorSealer = ReturnType<typeof successorSealer>;

/**
 * The successor of a rotated token, sealed for the grace window: a refresh retried inside it gets the
 * same one. Its key takes both the rotated token and a key of the gateway's (from OTP_SECRET), so the
 * database never holds a usable token: neither a dump of it alone, nor a dump and a token of the
 * session's past, whose chain of successors it would otherwise open up to the current one.
 */
export function successorSealer(secret: string) {
  const serverKey = Buffer.from(hkdfSync('sha256', secret, '', 'tessera refresh-token successor key', 32));
  const keyOf = (previous: string, version: number) =>
    Buffer.from(
      // Version 0, sealed before this one (no version byte): the rotated token alone.
      hkdfSync(
        'sha256',
        previous,
        version === VERSION ? serverKey : '',
        'tessera refresh-token successor',
        32,
      ),
    );
  return {
    seal(previous: string, successor: string): Buffer {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', keyOf(previous, VERSION), iv);
      const body = Buffer.concat([cipher.update(successor, 'utf8'), cipher.final()]);
      return Buffer.concat([Buffer.of(VERSION), iv, cipher.getAuthTag(), body]);
    },
    open(previous: string, sealed: Buffer): string {
      // A 43-character successor after a 12-byte IV and a 16-byte tag: version 0 as it is, version 1
      // behind its version byte. Nothing else opens.
      const version =
        sealed.length === SEALED ? 0 : sealed.length === SEALED + 1 && sealed[0] === VERSION ? VERSION : -1;
      if (version < 0) throw new Error('not a sealed successor');
      const at = version === 0 ? 0 : 1;
      const decipher = createDecipheriv(
        'aes-256-gcm',
        keyOf(previous, version),
        sealed.subarray(at, at + 12),
        {
          authTagLength: 16,
        },
      );
      decipher.setAuthTag(sealed.subarray(at + 12, at + 28));
      return Buffer.concat([decipher.update(sealed.subarray(at + 28)), decipher.final()]).toString('utf8');
    },
  };
}

const VERSION = 1;
const SEALED = 12 + 16 + 43;
