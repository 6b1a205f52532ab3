import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readKeyFile, signingKeyFromPem } from './keys.ts';

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
  });

  it('is never generated where creation is not allowed (production)', async () => {
    await expect(readKeyFile(path.join(dir, 'missing.pem'), false)).rejects.toThrow(/ENOENT/);
  });
});

describe('signingKeyFromPem', () => {
  it('derives a stable RFC 7638 kid and refuses unsupported key types', async () => {
    const file = path.join(dir, 'k.pem');
    const pem = await readKeyFile(file, true);
    expect(signingKeyFromPem(pem).kid).toBe(signingKeyFromPem(pem).kid);
    expect(signingKeyFromPem(pem).kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const { generateKeyPairSync } = await import('node:crypto');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    expect(() => signingKeyFromPem(rsa.toString())).toThrow(/Unsupported signing key type rsa/);
  });
});
