import { promises as fs } from 'node:fs';
import path from 'node:path';
import { generateSigningKeyPem, type SigningAlgorithm, signingKeyFromPem } from './modules/tokens/keys.ts';

const USAGE =
  'Usage: pnpm keygen <file> [--es256]   (writes a new Ed25519 private key, or P-256 with --es256)';

/**
 * Writes a new signing key to `file` (mode 0600; never over an existing file) and returns what may be
 * shown of it: its kid and its public JWK.
 */
export async function writeNewSigningKey(file: string, alg: SigningAlgorithm = 'EdDSA') {
  const key = signingKeyFromPem(generateSigningKeyPem(alg));
  // `wx`: fails with EEXIST instead of replacing a key that may still be in use.
  const handle = await fs.open(file, 'wx', 0o600);
  try {
    await handle.chmod(0o600); // whatever the umask
    await handle.writeFile(key.privateKeyPem);
  } finally {
    await handle.close();
  }
  return { kid: key.kid, jwk: key.jwk };
}

// `pnpm keygen <file> [--es256]`: a new key for rotation (see the README, "Key rotation").
if (import.meta.main) {
  const args = process.argv.slice(2);
  const files = args.filter((arg) => !arg.startsWith('--'));
  const flags = args.filter((arg) => arg.startsWith('--'));
  const file = files[0];
  if (!file || files.length > 1 || flags.some((flag) => flag !== '--es256')) {
    console.error(USAGE);
    process.exit(2);
  }
  const alg = flags.includes('--es256') ? 'ES256' : 'EdDSA';
  // Through `pnpm keygen` the script runs in this package's folder: a relative path means the caller's.
  const target = path.resolve(
    (process.env.npm_lifecycle_event === 'keygen' && process.env.INIT_CWD) || process.cwd(),
    file,
  );
  try {
    const { kid, jwk } = await writeNewSigningKey(target, alg);
    console.error(
      `Wrote a new ${alg === 'ES256' ? 'P-256' : 'Ed25519'} private key to ${target} (mode 0600)`,
    );
    console.log(`kid: ${kid}`);
    console.log(`public JWK: ${JSON.stringify(jwk)}`);
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    console.error(
      code === 'EEXIST'
        ? `keygen: ${target} already exists; not overwriting it`
        : `keygen: cannot write ${target}: ${message}`,
    );
    process.exit(1);
  }
}
