import envSchema from 'env-schema';
import { type Static, type TObject, Type } from 'typebox';

/** A configuration problem, said in one line that names the variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** `APP_ENV`: only development and test may show one-time codes. */
export const AppEnv = Type.Union(
  [Type.Literal('development'), Type.Literal('test'), Type.Literal('production')],
  {
    default: 'development',
  },
);

/** `LOG_LEVEL`: a pino level. */
export const LogLevel = Type.Union(
  [
    Type.Literal('fatal'),
    Type.Literal('error'),
    Type.Literal('warn'),
    Type.Literal('info'),
    Type.Literal('debug'),
    Type.Literal('trace'),
    Type.Literal('silent'),
  ],
  { default: 'info' },
);

/** Validates `env` against `schema`, applying defaults and parsing numbers, and freezes the result. */
export function readEnv<S extends TObject>(schema: S, env: NodeJS.ProcessEnv): Readonly<Static<S>> {
  try {
    return Object.freeze(envSchema<Static<S>>({ schema, data: env, env: false, dotenv: false }));
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${(error as Error).message.replaceAll('env/', '')}`);
  }
}

/** Production's non-negotiables: each group needs one of its variables set. */
export function requireInProduction(
  env: Readonly<Record<string, unknown>>,
  groups: ReadonlyArray<readonly string[]>,
): void {
  if (env.APP_ENV !== 'production') return;
  for (const names of groups) {
    if (!names.some((name) => env[name])) {
      throw new ConfigError(
        `Invalid configuration: ${names.join(' or ')} is required when APP_ENV=production`,
      );
    }
  }
}

/** Loads a service's configuration, or ends the process with the one-line reason (exit code 1). */
export function loadOrExit<T>(load: () => T): T {
  try {
    return load();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(error.message);
    process.exit(1);
  }
}
