import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  generateSigningKeyPem,
  readKeyFile,
  signingKeyFromPem,
  splitPemBlocks,
  UnsupportedKeyError,
  verificationKeyFromPem,
} from './keys.ts';
import { loadTokenKeys } from './load-keys.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tessera-keys-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('development signing key', () => {
  it('is generated once and shared by gateways starting together', async () => {
    const file = path.join(dir, 'nested', 'dev.pem');
    const pems = await Promise.all(Array.from({ length: 8 }, () => readKeyFile(file, true)));
    expect(new Set(pems).size).toBe(1);
    expect(await readFile(file, 'utf8')).toBe(pems[0]);
    expect(await readKeyFile(file, true)).toBe(pems[0]);
    expect(signingKeyFromPem(pems[0] ?? '').alg).toBe('EdDSA');
    // Readable by its owner alone, in a folder only its owner may list.
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(file))).mode & 0o777).toBe(0o700);
  });

  it('is said not to be creatable where its folder cannot be made, naming the way out', async () => {
    const notAFolder = path.join(dir, 'file');
    await writeFile(notAFolder, '');
    const file = path.join(notAFolder, 'tessera', 'dev.pem');
    const error = await loadTokenKeys({ privateKeyFile: file, createPrivateKeyFile: true }).catch(
      (e: Error) => e,
    );
    expect((error as Error).name).toBe('ConfigError');
    expect((error as Error).message).toBe(
      `Invalid configuration: JWT_PRIVATE_KEY_FILE: ${file}: cannot create the development signing key there (ENOTDIR): make its folder one that can be written, or set JWT_PRIVATE_KEY_FILE or JWT_PRIVATE_KEY`,
    );
  });

  it('is never generated where creation is not allowed (production)', async () => {
    await expect(readKeyFile(path.join(dir, 'missing.pem'), false)).rejects.toThrow(/ENOENT/);
  });
});

describe('signingKeyFromPem', () => {
  it('derives the RFC 7638 thumbprint as kid and refuses unsupported key types', async () => {
    // The Ed25519 key of RFC 8037, Appendix A, and its thumbprint given there (A.3).
    const pem = createPrivateKey({
      key: {
        kty: 'OKP',
        crv: 'Ed25519',
        d: 'nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A',
        x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo',
      },
      format: 'jwk',
    })
      .export({ type: 'pkcs8', format: 'pem' })
      .toString();
    expect(signingKeyFromPem(pem).kid).toBe('kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    expect(() => signingKeyFromPem(rsa.toString())).toThrow(/Unsupported signing key type rsa/);
  });

  it('gives each P-256 key a kid of its own', () => {
    const [a, b] = [1, 2].map(() => signingKeyFromPem(generateSigningKeyPem('ES256')));
    expect(a?.alg).toBe('ES256');
    expect(a?.kid).not.toBe(b?.kid);
  });
});

describe('verificationKeyFromPem', () => {
  it('keeps only the public half of a private key, and reads a public key to the same kid, alg and JWK', () => {
    for (const alg of ['EdDSA', 'ES256'] as const) {
      const pem = generateSigningKeyPem(alg);
      const signing = signingKeyFromPem(pem);
      expect(signing.alg).toBe(alg);
      const fromPrivate = verificationKeyFromPem(pem);
      const fromPublic = verificationKeyFromPem(signing.publicKeyPem);
      expect(fromPrivate).toEqual(fromPublic);
      expect(fromPrivate).toEqual({
        kid: signing.kid,
        alg,
        publicKeyPem: signing.publicKeyPem,
        jwk: signing.jwk,
      });
      expect(fromPrivate).not.toHaveProperty('privateKeyPem');
      expect(fromPrivate.jwk).not.toHaveProperty('d');
      expect(fromPrivate.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    }
    expect(verificationKeyFromPem(generateSigningKeyPem('ES256')).jwk).toMatchObject({
      kty: 'EC',
      crv: 'P-256',
      y: expect.any(String),
    });
  });

  it('refuses keys of other types and text that is not a key', async () => {
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({
      type: 'spki',
      format: 'pem',
    });
    expect(() => verificationKeyFromPem(p384.toString())).toThrow(UnsupportedKeyError);
    expect(() => verificationKeyFromPem(p384.toString())).toThrow(
      /Unsupported signing key type ec \(secp384r1\)/,
    );
    expect(() => verificationKeyFromPem('not a key')).toThrow();
    expect(() => verificationKeyFromPem('not a key')).not.toThrow(UnsupportedKeyError);
  });
});

describe('splitPemBlocks', () => {
  it('splits on -----BEGIN boundaries, drops blank text and EC PARAMETERS, keeps anything else to fail on', () => {
    const a = generateSigningKeyPem();
    const b = signingKeyFromPem(generateSigningKeyPem('ES256')).publicKeyPem;
    const params = '-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n';
    expect(splitPemBlocks(`\n  ${a}${b}\n\n`)).toEqual([a.trim(), b.trim()]);
    expect(splitPemBlocks(`${params}${a}`)).toEqual([a.trim()]);
    expect(splitPemBlocks('  \n')).toEqual([]);
    expect(splitPemBlocks(`junk\n${a}`)).toEqual(['junk', a.trim()]);
    expect(splitPemBlocks([a, b].join('')).map((pem) => verificationKeyFromPem(pem).kid)).toEqual([
      signingKeyFromPem(a).kid,
      verificationKeyFromPem(b).kid,
    ]);
  });
});
