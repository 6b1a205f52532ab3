import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../clock.ts';
import { signingKeyFromPem } from './keys.ts';
import { createTokenService } from './tokens.service.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapUsed = () => {
  gc();
  return getHeapStatistics().used_heap_size;
};

describe('the verified-token cache', () => {
  it('keeps no refusal: 10,000 forged tokens leave the heap as it was', async () => {
    const pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const tokens = createTokenService({
      signingKey: signingKeyFromPem(pem),
      issuer: 'https://auth.example.com',
      audience: 'app',
      accessTokenTtl: 900,
      clock: systemClock,
    });
    const claims = {
      sub: '00000000-0000-4000-8000-000000000001',
      sid: '00000000-0000-4000-8000-000000000002',
      roles: [],
    };
    const valid = tokens.signAccessToken(claims, new Date());
    // Each with the gateway's header and claims and a signature of its own, as a flood of forged
    // tokens from many addresses would be: each a new entry for a cache that keeps refusals.
    const unsigned = valid.slice(0, valid.lastIndexOf('.') + 1);

    await expect(tokens.verifyAccessToken(valid)).resolves.toMatchObject(claims);
    const before = heapUsed();
    let refused = 0;
    for (let i = 0; i < 10_000; i++) {
      const forged = unsigned + randomBytes(64).toString('base64url');
      await tokens.verifyAccessToken(forged).catch(() => refused++);
    }
    const grown = heapUsed() - before;

    expect(refused).toBe(10_000);
    // Kept as their errors, they held ~29 MB (~2.9 KB each) and pushed verified tokens out.
    expect(grown).toBeLessThan(2 * 1024 * 1024);
    await expect(tokens.verifyAccessToken(valid)).resolves.toMatchObject(claims);
  });
});
