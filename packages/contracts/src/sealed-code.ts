import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  type KeyObject,
  randomBytes,
} from 'node:crypto';

/** The keys of `MAIL_JOB_KEY`: the first seals, every one opens. */
export interface MailJobKeys {
  sealing: { id: string; key: Buffer };
  opening: ReadonlyMap<string, Buffer>;
}

/** `MAIL_JOB_KEY`'s form: comma-separated `kid:base64` entries, each key 32 bytes. */
const MAIL_JOB_KEY_FORM = /^[A-Za-z0-9_-]+:[A-Za-z0-9+/]{43}=(,[A-Za-z0-9_-]+:[A-Za-z0-9+/]{43}=)*$/;

/** Development and test only (production requires `MAIL_JOB_KEY`), so both services agree unconfigured. */
const DEVELOPMENT_MAIL_JOB_KEY = 'dev:aChNVorgtIZLj1LNoVvwAEamqBbsYjg+vtnPaa4kqdg=';

/**
 * Parses `MAIL_JOB_KEY` (unset: the development key); throws on a malformed entry, a key id given
 * twice, or, in `production`, the development key, which Tessera's source publishes.
 */
export function parseMailJobKeys(value = DEVELOPMENT_MAIL_JOB_KEY, production = false): MailJobKeys {
  if (!MAIL_JOB_KEY_FORM.test(value)) {
    throw new Error('MAIL_JOB_KEY must be comma-separated kid:base64 entries of 32-byte keys');
  }
  const entries = value.split(',').map((entry) => {
    const [id = '', key = ''] = entry.split(':');
    return [id, Buffer.from(key, 'base64')] as const;
  });
  // By the bytes: base64's last character carries bits that decoding drops, so spellings differ.
  const published = Buffer.from(DEVELOPMENT_MAIL_JOB_KEY.split(':')[1] ?? '', 'base64');
  if (production && entries.some(([, key]) => key.equals(published)))
    throw new Error("MAIL_JOB_KEY holds the development key, which Tessera's source publishes: generate one");
  const opening = new Map(entries);
  if (opening.size < entries.length) throw new Error('MAIL_JOB_KEY names a key id twice');
  const [id, key] = entries[0] as (typeof entries)[0];
  return { sealing: { id, key }, opening };
}

/**
 * Opening failed because this process lacks the key that sealed the code: no key has its id here, or
 * the key under that id is another one (MAIL_JOB_KEY differs between processes). Another mailer, or
 * this one's next deploy, may have it, unlike a bad seal.
 */
export class UnknownMailJobKeyError extends Error {
  override name = 'UnknownMailJobKeyError';
}

const b64 = (bytes: Buffer) => bytes.toString('base64url');

// A key as a KeyObject, made once: given as bytes, each cipher would import the key again.
const keyObjects = new WeakMap<Buffer, KeyObject>();
function keyObject(key: Buffer): KeyObject {
  let object = keyObjects.get(key);
  if (!object) {
    object = createSecretKey(key);
    keyObjects.set(key, object);
  }
  return object;
}

// Computed once per key, like its KeyObject.
const fingerprints = new WeakMap<Buffer, string>();
/** Tells keys apart without telling anything of them: 48 bits of an HMAC under the key. */
function fingerprint(key: Buffer): string {
  let print = fingerprints.get(key);
  if (print === undefined) {
    const mac = createHmac('sha256', keyObject(key)).update('tessera mail job key').digest();
    print = mac.subarray(0, 6).toString('base64url');
    fingerprints.set(key, print);
  }
  return print;
}

/**
 * Encrypts a code for a queued job (AES-256-GCM) as `kid.iv.ciphertext+tag.fingerprint`. The recipient
 * is authenticated with it, so a sealed code copied into a job for another address does not open; the
 * key's fingerprint tells a mailer whose key under that id is another one from a tampered seal. It
 * comes last, where a mailer that predates it does not look: gateways and mailers upgrade in any order.
 */
export function sealCode(code: string, recipient: string, { sealing }: MailJobKeys): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyObject(sealing.key), iv);
  cipher.setAAD(Buffer.from(recipient));
  const sealed = Buffer.concat([cipher.update(code, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `${sealing.id}.${b64(iv)}.${b64(sealed)}.${fingerprint(sealing.key)}`;
}

/** The code of `sealCode`; throws if it was sealed for another recipient, altered, or with an unknown key. */
export function openCode(sealed: string, recipient: string, { opening }: MailJobKeys): string {
  // Without a fingerprint: sealed before seals carried one.
  const [id = '', iv = '', body = '', print] = sealed.split('.');
  const key = opening.get(id);
  if (!key) throw new UnknownMailJobKeyError(`No MAIL_JOB_KEY with key id "${id}"`);
  if (print !== undefined && print !== fingerprint(key))
    throw new UnknownMailJobKeyError(`MAIL_JOB_KEY "${id}" is not the key that sealed the code`);
  const bytes = Buffer.from(body, 'base64url');
  if (bytes.length < 17) throw new Error('Sealed code is malformed');
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyObject(key), Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(recipient));
    decipher.setAuthTag(bytes.subarray(-16));
    return Buffer.concat([decipher.update(bytes.subarray(0, -16)), decipher.final()]).toString('utf8');
  } catch {
    throw new Error('Sealed code does not authenticate');
  }
}
