import { promises as fs } from 'node:fs';
import { ConfigError } from '@tessera/config';
import {
  KeyFileNotCreatedError,
  readKeyFile,
  type SigningKey,
  signingKeyFromPem,
  splitPemBlocks,
  UnsupportedKeyError,
  type VerificationKey,
  verificationKeyFromPem,
} from './keys.ts';

/** Where the keys come from: JWT_PRIVATE_KEY(_FILE) signs, JWT_VERIFY_KEY(S|_FILES) only verify. */
export interface KeyConfig {
  privateKey?: string | undefined;
  privateKeyFile: string;
  /** Creates the file with a new key when it does not exist (development's default file only). */
  createPrivateKeyFile: boolean;
  verifyKeys?: string | undefined;
  verifyKeyFiles?: string | undefined;
}

/**
 * The signing key (JWT_PRIVATE_KEY or JWT_PRIVATE_KEY_FILE, created when missing if `createPrivateKeyFile`)
 * and the keys that only verify (JWT_VERIFY_KEYS, JWT_VERIFY_KEY_FILES). Bad key material throws a
 * ConfigError, one line naming the variable (and the file).
 */
export async function loadTokenKeys(
  config: KeyConfig,
): Promise<{ signingKey: SigningKey; verificationKeys: VerificationKey[] }> {
  const signingKey =
    config.privateKey !== undefined
      ? parseKey('JWT_PRIVATE_KEY', config.privateKey, signingKeyFromPem)
      : parseKey(
          `JWT_PRIVATE_KEY_FILE: ${config.privateKeyFile}`,
          await readOrFail(`JWT_PRIVATE_KEY_FILE: ${config.privateKeyFile}`, () =>
            readKeyFile(config.privateKeyFile, config.createPrivateKeyFile),
          ),
          signingKeyFromPem,
        );

  const verificationKeys = splitPemBlocks(config.verifyKeys ?? '').map((pem, index) =>
    parseKey(`JWT_VERIFY_KEYS: key ${index + 1}`, pem, verificationKeyFromPem),
  );
  const files = (config.verifyKeyFiles ?? '')
    .split(',')
    .map((file) => file.trim())
    .filter(Boolean);
  for (const file of files) {
    const where = `JWT_VERIFY_KEY_FILES: ${file}`;
    const blocks = splitPemBlocks(await readOrFail(where, () => fs.readFile(file, 'utf8')));
    if (blocks.length === 0) throw new ConfigError(`Invalid configuration: ${where}: no PEM key in the file`);
    for (const pem of blocks) verificationKeys.push(parseKey(where, pem, verificationKeyFromPem));
  }
  return { signingKey, verificationKeys };
}

function parseKey<K>(where: string, pem: string, parse: (pem: string) => K): K {
  try {
    return parse(pem);
  } catch (error) {
    const reason =
      error instanceof UnsupportedKeyError
        ? `${error.keyType}; use Ed25519 or P-256`
        : parse === signingKeyFromPem
          ? 'not an unencrypted PEM private key'
          : 'not an unencrypted PEM private or public key';
    throw new ConfigError(`Invalid configuration: ${where}: unsupported key (${reason})`);
  }
}

async function readOrFail(where: string, read: () => Promise<string>): Promise<string> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof KeyFileNotCreatedError)
      throw new ConfigError(
        `Invalid configuration: ${where}: cannot create the development signing key there (${error.code}): make its folder one that can be written, or set JWT_PRIVATE_KEY_FILE or JWT_PRIVATE_KEY`,
      );
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`Invalid configuration: ${where}: cannot read the file (${code})`);
  }
}
