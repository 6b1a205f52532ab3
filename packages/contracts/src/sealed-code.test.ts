import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openCode, parseMailJobKeys, sealCode, UnknownMailJobKeyError } from './sealed-code.ts';

const key = () => randomBytes(32).toString('base64');
const [k1, k2] = [key(), key()];

describe('sealCode and openCode', () => {
  const keys = parseMailJobKeys(`k1:${k1}`);

  it('open what they sealed, for the same recipient, with no code in clear', () => {
    const sealed = sealCode('4826', 'alice@example.com', keys);
    expect(sealed).toMatch(/^k1\.[\w-]{16}\.[\w-]+\.[\w-]{8}$/);
    // Not as a part of its own, nor inside one as bytes. (Any four letters of base64url may occur by chance.)
    expect(sealed).not.toMatch(/(?<![\w-])4826(?![\w-])/);
    for (const part of sealed.split('.')) expect(Buffer.from(part, 'base64url').includes('4826')).toBe(false);
    expect(openCode(sealed, 'alice@example.com', keys)).toBe('4826');
    // A fresh IV each time: equal codes do not give equal seals.
    expect(sealCode('4826', 'alice@example.com', keys)).not.toBe(sealed);
  });

  it('refuse a tampered seal', () => {
    const sealed = sealCode('4826', 'alice@example.com', keys);
    const [id, iv, body = ''] = sealed.split('.');
    const bytes = Buffer.from(body, 'base64url');
    for (const index of [0, bytes.length - 1]) {
      const flipped = Buffer.from(bytes);
      flipped[index] = (flipped[index] ?? 0) ^ 1;
      expect(() =>
        openCode(`${id}.${iv}.${flipped.toString('base64url')}`, 'alice@example.com', keys),
      ).toThrow('Sealed code does not authenticate');
    }
    expect(() => openCode(`${id}.${iv}.${body.slice(0, 10)}`, 'alice@example.com', keys)).toThrow();
  });

  it('refuse a seal moved to another recipient', () => {
    const sealed = sealCode('4826', 'alice@example.com', keys);
    expect(() => openCode(sealed, 'mallory@example.com', keys)).toThrow('Sealed code does not authenticate');
  });

  it('refuse a seal of an unknown key id, and of another key under the same id, as keys this process lacks', () => {
    const other = parseMailJobKeys(`k2:${k2}`);
    const sealed = sealCode('4826', 'alice@example.com', other);
    expect(() => openCode(sealed, 'alice@example.com', keys)).toThrow(UnknownMailJobKeyError);
    // MAIL_JOB_KEY differs between processes: another mailer may hold the key, unlike a tampered seal.
    const elsewhere = parseMailJobKeys(`k1:${k2}`);
    expect(() => openCode(sealCode('4826', 'a@example.com', elsewhere), 'a@example.com', keys)).toThrow(
      new UnknownMailJobKeyError('MAIL_JOB_KEY "k1" is not the key that sealed the code'),
    );
  });

  it('open seals without a fingerprint, and seal codes that a mailer reading three parts opens', () => {
    // Made before seals named their key by fingerprint (still queued at an upgrade).
    const [, iv, body] = sealCode('4826', 'alice@example.com', keys).split('.');
    expect(openCode(`k1.${iv}.${body}`, 'alice@example.com', keys)).toBe('4826');
    expect(() => openCode(`k1.${iv}.${body}`, 'mallory@example.com', keys)).toThrow(
      'Sealed code does not authenticate',
    );
    // A mailer that predates fingerprints reads `kid.iv.body` and ignores what follows.
    const [id, ...rest] = sealCode('5937', 'alice@example.com', keys).split('.');
    expect(id).toBe('k1');
    expect(openCode([id, ...rest.slice(0, 2)].join('.'), 'alice@example.com', keys)).toBe('5937');
  });
});

describe('rotation', () => {
  it('seals with the first key and opens with every key listed', () => {
    const before = parseMailJobKeys(`k1:${k1}`);
    const during = parseMailJobKeys(`k2:${k2},k1:${k1}`);
    const after = parseMailJobKeys(`k2:${k2}`);

    const old = sealCode('4826', 'alice@example.com', before);
    const fresh = sealCode('5937', 'alice@example.com', during);
    expect(fresh.startsWith('k2.')).toBe(true);
    expect(openCode(old, 'alice@example.com', during)).toBe('4826');
    expect(openCode(fresh, 'alice@example.com', after)).toBe('5937');
    // Once the old key is removed, what it sealed no longer opens.
    expect(() => openCode(old, 'alice@example.com', after)).toThrow(UnknownMailJobKeyError);
  });
});

describe('parseMailJobKeys', () => {
  it('has a development key when MAIL_JOB_KEY is unset', () => {
    const keys = parseMailJobKeys(undefined);
    expect(keys.sealing.key).toHaveLength(32);
    expect(openCode(sealCode('4826', 'a@example.com', keys), 'a@example.com', parseMailJobKeys())).toBe(
      '4826',
    );
  });

  it('refuses malformed entries, keys that are not 32 bytes, and a key id given twice', () => {
    for (const value of ['', k1, `k1:${k1},`, `k1 :${k1}`, `k1:${randomBytes(16).toString('base64')}`])
      expect(() => parseMailJobKeys(value), value).toThrow(/^MAIL_JOB_KEY must be/);
    expect(() => parseMailJobKeys(`k1:${k1},k1:${k2}`)).toThrow('MAIL_JOB_KEY names a key id twice');
  });
});
