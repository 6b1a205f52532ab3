import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createSigner } from 'fast-jwt';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AppOptions, buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { generateSigningKeyPem, signingKeyFromPem } from '../src/modules/tokens/keys.ts';
import { loadTokenKeys } from '../src/modules/tokens/load-keys.ts';
import {
  bearer,
  body,
  envBeside,
  manualClock,
  PRODUCTION_MAIL_JOB_KEY,
  post,
  runScript,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

const SESSIONS = '/api/v1/auth/sessions';
const JWKS = '/.well-known/jwks.json';

type App = Awaited<ReturnType<typeof buildApp>>;

const K1 = generateSigningKeyPem();
const K2 = generateSigningKeyPem();
const kid = (pem: string) => signingKeyFromPem(pem).kid;

let base: TestGateway;
let dir: string;
beforeAll(async () => {
  base = await startGateway({ JWT_PRIVATE_KEY: K1 });
  dir = await mkdtemp(path.join(os.tmpdir(), 'tessera-key-rotation-'));
});
afterAll(async () => {
  await base?.close();
  await rm(dir, { recursive: true, force: true });
});

const sharedEnv = (env: Record<string, string>) => envBeside(base, env);

// Another instance of the gateway sharing `base`'s database and Redis (a redeploy with other keys).
const started: App[] = [];
async function instance(env: Record<string, string>, options: AppOptions = {}): Promise<App> {
  const app = await buildApp(loadConfig(sharedEnv(env)), options);
  started.push(app);
  return app;
}
afterEach(async () => {
  await Promise.all(started.splice(0).map((app) => app.close()));
});

const decode = (token: string) => {
  const [header = '', payload = ''] = token.split('.');
  return {
    header: JSON.parse(Buffer.from(header, 'base64url').toString()),
    payload: JSON.parse(Buffer.from(payload, 'base64url').toString()),
  };
};
const sessions = (app: App, accessToken: string) =>
  app.inject({ method: 'GET', url: SESSIONS, headers: bearer(accessToken) });
const jwksKids = async (app: App) =>
  (await app.inject({ method: 'GET', url: JWKS })).json().keys.map((key: { kid: string }) => key.kid);
const p256 = () => generateKeyPairSync('ec', { namedCurve: 'P-256' });

describe('key rotation', () => {
  it('keeps tokens of the previous key working while it is a verify key, and refuses them once it is removed', async () => {
    const old = await signIn(base.app, 'alice@example.com');
    expect(decode(old.accessToken).header.kid).toBe(kid(K1));

    // Rotated: K2 signs, K1 only verifies.
    const rotated = await instance({ JWT_PRIVATE_KEY: K2, JWT_VERIFY_KEYS: K1 });
    expect((await sessions(rotated, old.accessToken)).statusCode).toBe(200);
    const fresh = await signIn(rotated, 'bob@example.com');
    expect(decode(fresh.accessToken).header).toMatchObject({ alg: 'EdDSA', kid: kid(K2) });
    expect((await sessions(rotated, fresh.accessToken)).statusCode).toBe(200);
    // A refresh of a session started under K1 moves it to K2.
    const refreshed = body(
      await post(rotated, '/api/v1/auth/refresh-token', { refreshToken: old.refreshToken }),
    ).data;
    expect(decode(refreshed.accessToken).header.kid).toBe(kid(K2));
    expect(await jwksKids(rotated)).toEqual([kid(K2), kid(K1)]);
    // An instance that does not know K2 yet refuses its tokens: why the rotation publishes it first.
    expect((await sessions(base.app, fresh.accessToken)).statusCode).toBe(401);

    // K1 removed.
    const after = await instance({ JWT_PRIVATE_KEY: K2 });
    const refused = await sessions(after, old.accessToken);
    expect(refused.statusCode).toBe(401);
    expect(refused.json().errors[0]).toBe('Authentication required');
    expect((await sessions(after, fresh.accessToken)).statusCode).toBe(200);
    expect((await sessions(after, refreshed.accessToken)).statusCode).toBe(200);
    expect(await jwksKids(after)).toEqual([kid(K2)]);
  });

  it('reads JWT_VERIFY_KEY_FILES (an Ed25519 private key, a P-256 public key) and verifies each with its own algorithm', async () => {
    const ed = generateSigningKeyPem();
    const ec = p256();
    const edFile = path.join(dir, 'old-ed25519.pem');
    const ecFile = path.join(dir, 'old-p256.pub.pem');
    await writeFile(edFile, ed);
    await writeFile(ecFile, ec.publicKey.export({ type: 'spki', format: 'pem' }));
    const ecPrivate = ec.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const ecKid = signingKeyFromPem(ecPrivate).kid;

    const app = await instance({ JWT_PRIVATE_KEY: K2, JWT_VERIFY_KEY_FILES: ` ${edFile} , ${ecFile},` });
    const { keys } = (await app.inject({ method: 'GET', url: JWKS })).json();
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatchObject({ kid: kid(K2), alg: 'EdDSA' });
    expect(keys[1]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid: kid(ed), alg: 'EdDSA', use: 'sig' });
    expect(keys[2]).toMatchObject({ kty: 'EC', crv: 'P-256', kid: ecKid, alg: 'ES256', use: 'sig' });
    for (const key of keys) expect(key).not.toHaveProperty('d');

    // Tokens those keys signed before the rotation, for a live session.
    const { payload } = decode((await signIn(app, 'carol@example.com')).accessToken);
    const byEd = createSigner({ key: ed, algorithm: 'EdDSA', kid: kid(ed) })(payload);
    const byEc = createSigner({ key: ecPrivate, algorithm: 'ES256', kid: ecKid })(payload);
    expect((await sessions(app, byEd)).statusCode).toBe(200);
    expect((await sessions(app, byEc)).statusCode).toBe(200);

    // alg pinned per kid: a kid's key, but another algorithm in the header, is refused either way.
    const forged = [
      createSigner({ key: ecPrivate, algorithm: 'ES256', kid: kid(ed) })(payload),
      createSigner({ key: ed, algorithm: 'EdDSA', kid: ecKid })(payload),
    ];
    for (const token of forged) expect((await sessions(app, token)).statusCode, token).toBe(401);
  });

  it('reads several PEM blocks from JWT_VERIFY_KEYS and lists a copy of the signing key once', async () => {
    const ec = p256();
    const text = [
      `  ${K1}`,
      ec.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      K2, // the signing key again
    ].join('\n');
    const app = await instance({ JWT_PRIVATE_KEY: K2, JWT_VERIFY_KEYS: text });
    const ecKid = signingKeyFromPem(ec.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()).kid;
    expect(await jwksKids(app)).toEqual([kid(K2), kid(K1), ecKid]);
  });
});

describe('bad key material', () => {
  const keysOf = (env: Record<string, string>) => loadTokenKeys(loadConfig(sharedEnv(env)).jwt);

  it('fails with one line naming the variable (and the file)', async () => {
    const rsaFile = path.join(dir, 'rsa.pem');
    const junkFile = path.join(dir, 'junk.pem');
    const emptyFile = path.join(dir, 'empty.pem');
    const missing = path.join(dir, 'missing.pem');
    await writeFile(
      rsaFile,
      generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
    );
    await writeFile(junkFile, '-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n');
    await writeFile(emptyFile, '');

    const cases: Array<[Record<string, string>, string]> = [
      [
        { JWT_PRIVATE_KEY: K1, JWT_VERIFY_KEY_FILES: `${missing}` },
        `Invalid configuration: JWT_VERIFY_KEY_FILES: ${missing}: cannot read the file (ENOENT)`,
      ],
      [
        { JWT_PRIVATE_KEY: K1, JWT_VERIFY_KEY_FILES: `${emptyFile}` },
        `Invalid configuration: JWT_VERIFY_KEY_FILES: ${emptyFile}: no PEM key in the file`,
      ],
      [
        { JWT_PRIVATE_KEY: K1, JWT_VERIFY_KEY_FILES: `${junkFile}` },
        `Invalid configuration: JWT_VERIFY_KEY_FILES: ${junkFile}: unsupported key (not an unencrypted PEM private or public key)`,
      ],
      [
        { JWT_PRIVATE_KEY: K1, JWT_VERIFY_KEY_FILES: `${emptyFile},${rsaFile}` },
        `Invalid configuration: JWT_VERIFY_KEY_FILES: ${emptyFile}: no PEM key in the file`,
      ],
      [
        { JWT_PRIVATE_KEY: K1, JWT_VERIFY_KEY_FILES: rsaFile },
        `Invalid configuration: JWT_VERIFY_KEY_FILES: ${rsaFile}: unsupported key (rsa; use Ed25519 or P-256)`,
      ],
      [
        {
          JWT_PRIVATE_KEY: K1,
          JWT_VERIFY_KEYS: `${K2}-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----`,
        },
        'Invalid configuration: JWT_VERIFY_KEYS: key 2: unsupported key (not an unencrypted PEM private or public key)',
      ],
      [
        { JWT_PRIVATE_KEY: signingKeyFromPem(K1).publicKeyPem },
        'Invalid configuration: JWT_PRIVATE_KEY: unsupported key (not an unencrypted PEM private key)',
      ],
      [
        { JWT_PRIVATE_KEY: 'not a key' },
        'Invalid configuration: JWT_PRIVATE_KEY: unsupported key (not an unencrypted PEM private key)',
      ],
      [
        { JWT_PRIVATE_KEY: K1, JWT_VERIFY_KEYS: `not a key\n${K2}` },
        'Invalid configuration: JWT_VERIFY_KEYS: key 1: unsupported key (not an unencrypted PEM private or public key)',
      ],
      [
        { JWT_PRIVATE_KEY_FILE: rsaFile },
        `Invalid configuration: JWT_PRIVATE_KEY_FILE: ${rsaFile}: unsupported key (rsa; use Ed25519 or P-256)`,
      ],
      [
        { APP_ENV: 'production', MAIL_JOB_KEY: PRODUCTION_MAIL_JOB_KEY, JWT_PRIVATE_KEY_FILE: missing },
        `Invalid configuration: JWT_PRIVATE_KEY_FILE: ${missing}: cannot read the file (ENOENT)`,
      ],
      // In development too: only the default file is created when missing, not a mistyped name.
      [
        { JWT_PRIVATE_KEY_FILE: missing },
        `Invalid configuration: JWT_PRIVATE_KEY_FILE: ${missing}: cannot read the file (ENOENT)`,
      ],
    ];
    for (const [env, message] of cases) {
      const error = await keysOf(env).then(
        () => undefined,
        (caught: Error) => caught,
      );
      expect(error?.name, message).toBe('ConfigError');
      expect(error?.message).toBe(message);
    }
  });

  it('stops the server at startup with that line and exit code 1', async () => {
    const rsaFile = path.join(dir, 'rsa-startup.pem');
    await writeFile(
      rsaFile,
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }),
    );
    const result = await runScript(['src/server.ts'], {
      ...sharedEnv({ JWT_PRIVATE_KEY: K1, JWT_VERIFY_KEY_FILES: rsaFile }),
      PORT: '0',
      HOST: '127.0.0.1',
    });
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([
      `Tessera gateway failed to start: Invalid configuration: JWT_VERIFY_KEY_FILES: ${rsaFile}: unsupported key (rsa; use Ed25519 or P-256)`,
    ]);
  });
});

describe('JWT_CLOCK_TOLERANCE', () => {
  it('accepts a token expired less than the tolerance ago (30 s by default) and refuses one expired longer ago', async () => {
    const ttl = base.config.jwt.accessTokenTtl;
    const clock = manualClock();
    const app = await instance({ JWT_PRIVATE_KEY: K1 }, { clock });
    const strict = await instance({ JWT_PRIVATE_KEY: K1, JWT_CLOCK_TOLERANCE: '0' }, { clock });
    const { accessToken } = await signIn(app, 'dave@example.com');

    // 20 s (and a fraction: `exp` is in whole seconds) after it expired.
    clock.advance(ttl + 20);
    expect((await sessions(app, accessToken)).statusCode).toBe(200);
    // No tolerance: refused.
    expect((await sessions(strict, accessToken)).statusCode).toBe(401);

    clock.advance(20);
    expect((await sessions(app, accessToken)).statusCode).toBe(401);
  });
});

describe('pnpm keygen', () => {
  it('writes a new private key with mode 0600, prints its kid and public JWK, and never overwrites', async () => {
    const file = path.join(dir, 'new.pem');
    const first = await runScript(['src/keygen.ts', file]);
    expect(first.code).toBe(0);
    const written = await readFile(file, 'utf8');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const key = signingKeyFromPem(written);
    expect(key.alg).toBe('EdDSA');
    expect(first.stdout).toContain(key.kid);
    const jwk = JSON.parse(/\{.*\}/.exec(first.stdout)?.[0] ?? 'null');
    expect(jwk).toEqual(key.jwk);
    expect(first.stdout).not.toContain('PRIVATE');
    expect(jwk).not.toHaveProperty('d');

    const again = await runScript(['src/keygen.ts', file]);
    expect(again.code).toBe(1);
    expect(again.stderr.trim()).toBe(`keygen: ${file} already exists; not overwriting it`);
    expect(again.stdout).toBe('');
    expect(await readFile(file, 'utf8')).toBe(written);

    // The file serves as the signing key.
    const app = await instance({ JWT_PRIVATE_KEY_FILE: file });
    const { accessToken } = await signIn(app, 'frank@example.com');
    expect(decode(accessToken).header).toMatchObject({ alg: 'EdDSA', kid: key.kid });
    expect((await sessions(app, accessToken)).statusCode).toBe(200);
  });

  it('makes a P-256 key with --es256, and prints usage (exit 2) without a file', async () => {
    const file = path.join(dir, 'new-es256.pem');
    const es = await runScript(['src/keygen.ts', file, '--es256']);
    expect(es.code).toBe(0);
    const key = signingKeyFromPem(await readFile(file, 'utf8'));
    expect(key.alg).toBe('ES256');
    expect(es.stdout).toContain(key.kid);

    const usage = await runScript(['src/keygen.ts']);
    expect(usage.code).toBe(2);
    expect(usage.stdout).toBe('');
    expect(usage.stderr).toMatch(/^Usage: pnpm keygen <file> \[--es256\]/);
  });
});
