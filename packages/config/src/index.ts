import { readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import envSchema from 'env-schema';
import { closestMatch } from 'leven';
import { parse as parsePostgresUrl } from 'pg-connection-string';
import { type Static, type TObject, type TSchema, Type } from 'typebox';

/** A configuration problem, said in one line that names the variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * One setting: the environment variable it is read from, on a TypeBox schema that gives its type,
 * default and meaning. A service's configuration is a nested object of these, so the type, the
 * validation and the README table all come from one schema.
 */
export function variable<T extends TSchema>(name: string, schema: T): T {
  return { ...schema, env: name };
}

const appEnv = variable(
  'APP_ENV',
  Type.Union([Type.Literal('development'), Type.Literal('test'), Type.Literal('production')], {
    default: 'development',
    description:
      '`development`, `test` or `production`. Only development and test return the code (the gateway warns at start). Unset while `NODE_ENV=production`, the services refuse to start.',
  }),
);
const logLevel = variable(
  'LOG_LEVEL',
  Type.Union(
    [
      Type.Literal('fatal'),
      Type.Literal('error'),
      Type.Literal('warn'),
      Type.Literal('info'),
      Type.Literal('debug'),
      Type.Literal('trace'),
      Type.Literal('silent'),
    ],
    {
      default: 'info',
      description: 'pino level (`silent` … `trace`). Pretty logs in development, JSON otherwise.',
    },
  ),
);
const redisUrl = variable(
  'REDIS_URL',
  Type.String({
    minLength: 1,
    default: 'redis://127.0.0.1:6379',
    description:
      "Redis: a `redis://` or `rediss://` URL (or, without a cluster, a Unix socket's path); codes, active sessions, limits and the queue.",
  }),
);
const redisClusterNodes = variable(
  'REDIS_CLUSTER_NODES',
  Type.String({
    default: '',
    pattern: '^([^,\\s]+:\\d+(,[^,\\s]+:\\d+)*)?$',
    description:
      'Comma-separated `host:port` seeds of a Redis Cluster. Set, both services use the cluster and `REDIS_URL` gives only its credentials and TLS (`rediss:`).',
  }),
);
// On a cluster, BullMQ needs every key of a queue in one slot: the prefix must be a hash tag.
const bullmqPrefix = variable(
  'BULLMQ_PREFIX',
  Type.String({
    minLength: 1,
    default: '{tessera}',
    description:
      'BullMQ key prefix of the `email` queue, no blanks; with `REDIS_CLUSTER_NODES` it must hold a hash tag (`{…}`). Gateway and mailer must agree. Changing it orphans queued jobs.',
  }),
);

const mailJobKey = Type.Optional(
  variable(
    'MAIL_JOB_KEY',
    Type.String({
      description:
        'AES-256-GCM keys that seal the code in queued email jobs: comma-separated `kid:base64` (32 bytes each, `openssl rand -base64 32`); the first seals, all open. Gateway and mailer must share them. Required in production, which refuses the development key (fixed, and published in the source).',
    }),
  ),
);

const shutdownTimeout = variable(
  'SHUTDOWN_TIMEOUT',
  Type.Integer({
    minimum: 1,
    maximum: 3600,
    default: 30,
    description:
      'Seconds a SIGTERM/SIGINT drain may take, at most an hour (in-flight requests and jobs finish, then exit 0); past it the process exits 1.',
  }),
);

/**
 * The Redis and queue settings both services read, checked further than their schemas as each loads
 * its configuration (the values are not quoted back: REDIS_URL may hold a password).
 */
export function checkQueueSettings({
  redisUrl,
  clusterNodes,
  prefix,
}: {
  redisUrl: string;
  clusterNodes: string;
  /** BULLMQ_PREFIX. */
  prefix: string;
}): void {
  checkRedisUrl(redisUrl, clusterNodes);
  // A stray blank (a CRLF .env file) would name another queue than the other service's.
  if (/\s/.test(prefix))
    throw new ConfigError('Invalid configuration: BULLMQ_PREFIX must not contain blanks');
  // Redis hashes the part between the first { and the next } only: one slot for every queue key.
  if (clusterNodes !== '' && !/^[^{]*\{[^}]+\}/.test(prefix))
    throw new ConfigError(
      'Invalid configuration: BULLMQ_PREFIX must hold a hash tag, such as {tessera}, when REDIS_CLUSTER_NODES is set (BullMQ needs every key of the queue in one slot)',
    );
}

/** REDIS_URL checked further than its schema (REDIS_CLUSTER_NODES beside it); see checkQueueSettings. */
export function checkRedisUrl(redisUrl: string, clusterNodes: string): void {
  // A redis:// or rediss:// URL, in lower case (ioredis turns TLS on for `rediss://` only as written),
  // or without a cluster a Unix socket's path (no credentials in it). Anything else with a slash
  // (`http://…`, `redis//…`, `/:pass@host`) ioredis reads as a socket path and says so with the whole
  // value, password included; a cluster's options are read from it as a URL.
  if (!/^rediss?:\/\//.test(redisUrl) && (clusterNodes !== '' || !/^\/(?!\/)[^@]*$/.test(redisUrl)))
    throw new ConfigError(
      `Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL${clusterNodes === '' ? " (or a Unix socket's path)" : ''}`,
    );
  if (redisUrl.startsWith('/')) return;
  // Read as a URL later, the services would fail with the value in the error, password included.
  if (!URL.canParse(redisUrl)) throw new ConfigError(`Invalid configuration: ${unreadableUrl('REDIS_URL')}`);
}

/**
 * What is wrong with DATABASE_URL for the gateway and `pnpm db:migrate` alike, or undefined: it must
 * be a Postgres URL (a Unix socket too: `postgres:///tessera?host=/var/run/postgresql`), as
 * node-postgres's own parser reads it. Anything else node-postgres reads as a host named by part of
 * the value (`getaddrinfo ENOTFOUND base`) or as a socket folder (`//user:pass@host` said back
 * whole), or fails at the first query with "Invalid URL" (a password's `/`, a port that is no
 * number), naming nothing. The value is never said back.
 */
export function databaseUrlProblem(url: string): string | undefined {
  if (!/^postgres(ql)?:\/\//i.test(url))
    return 'DATABASE_URL must be a postgres:// or postgresql:// URL (a Unix socket: postgres:///tessera?host=/var/run/postgresql)';
  try {
    parsePostgresUrl(url);
    return undefined;
  } catch {
    return unreadableUrl('DATABASE_URL');
  }
}

/** What is wrong with a URL that does not parse: the value is not said back, its password with it. */
export const unreadableUrl = (variable: string) =>
  `${variable} is no URL that can be read: percent-encode the reserved characters of its user and password (/ : @ # ? % and blanks, as encodeURIComponent does) and check its port`;

/** The settings both services read, declared once: `shared.appEnv`, `shared.logLevel`, … */
export const shared = {
  appEnv,
  logLevel,
  redisUrl,
  redisClusterNodes,
  bullmqPrefix,
  mailJobKey,
  shutdownTimeout,
};

export type AppEnv = Static<typeof appEnv>;

interface Leaf {
  /** Where the value goes in the configuration object. */
  path: string[];
  name: string;
  schema: TSchema & {
    env: string;
    type?: unknown;
    default?: unknown;
    description?: string;
    anyOf?: { const?: unknown }[];
  };
  required: boolean;
}

/** Every setting of a configuration schema, in declaration order. */
export function variablesOf(schema: TObject, path: string[] = []): Leaf[] {
  const required = new Set<string>(schema.required ?? []);
  return Object.entries(schema.properties).flatMap(([key, child]) => {
    const name = (child as { env?: unknown }).env;
    if (typeof name === 'string')
      return [{ path: [...path, key], name, schema: child as Leaf['schema'], required: required.has(key) }];
    if ((child as TSchema & { type?: unknown }).type === 'object')
      return variablesOf(child as TObject, [...path, key]);
    throw new Error(`configuration schema: ${[...path, key].join('.')} names no variable`);
  });
}

/**
 * Whether the platform says this is a deployment (NODE_ENV=production) and Tessera was not told:
 * development, the default, would answer sign-in codes to whoever asks (a mailer write them to disk
 * instead of sending them, `db:migrate` create a missing database).
 */
export const appEnvMissingInProduction = (env: NodeJS.ProcessEnv): boolean =>
  env.APP_ENV === undefined && env.NODE_ENV === 'production';

/**
 * Validates `env` against a service's configuration schema (defaults applied, numbers parsed) and
 * returns the nested, frozen configuration. A bad value throws a ConfigError naming its variable.
 */
export function readConfig<S extends TObject>(schema: S, env: NodeJS.ProcessEnv): Static<S> {
  const leaves = variablesOf(schema);
  if (appEnvMissingInProduction(env) && leaves.some((leaf) => leaf.name === 'APP_ENV'))
    throw new ConfigError(
      'Invalid configuration: APP_ENV is not set and NODE_ENV=production: set APP_ENV=production to deploy (development answers sign-in codes to whoever asks), or APP_ENV=development',
    );
  const flat = {
    type: 'object',
    // Ajv knows nothing of `env`: it names the variable, the property key does that here.
    properties: Object.fromEntries(leaves.map(({ name, schema: { env: _, ...rule } }) => [name, rule])),
    required: leaves.filter((leaf) => leaf.required && leaf.schema.default === undefined).map((l) => l.name),
  };
  for (const { name, schema: rule } of leaves) {
    const value = env[name];
    // Ajv would read 0x10 as 16 and 1e3 as 1000: a number of seconds or of anything is written out.
    if (rule.type === 'integer' && value !== undefined && !/^\s*-?\d+\s*$/.test(value))
      throw new ConfigError(`Invalid configuration: ${name} must be a whole number in decimal digits`);
    // Ajv would say "must be equal to constant" once per choice; the choices are what helps.
    const choices = rule.anyOf?.map((choice) => choice.const);
    if (
      value !== undefined &&
      choices?.every((choice) => typeof choice === 'string') &&
      !choices.includes(value)
    )
      throw new ConfigError(`Invalid configuration: ${name} must be one of ${choices.join(', ')}`);
  }
  let values: Record<string, unknown>;
  try {
    values = envSchema<Record<string, unknown>>({ schema: flat, data: env, env: false, dotenv: false });
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${(error as Error).message.replaceAll('env/', '')}`);
  }
  return deepFreeze(nest(schema, values)) as Static<S>;
}

/** The values read by variable name, placed where the schema puts each setting. */
function nest(schema: TObject, values: Record<string, unknown>): Record<string, unknown> {
  const entries = Object.entries(schema.properties).map(([key, child]) => {
    const name = (child as { env?: unknown }).env;
    return [key, typeof name === 'string' ? values[name] : nest(child as TObject, values)];
  });
  return Object.fromEntries(entries.filter(([, value]) => value !== undefined));
}

/** A name in upper case with its last word's plural made singular (`TRUST_PROXIES`: `TRUST_PROXY`). */
const singular = (name: string) => name.toUpperCase().replace(/IES$/, 'Y').replace(/S$/, '');

/** Whether `a` is `b` with two neighbouring letters swapped (`CROS` for `CORS`). */
function swapped(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  const at = [...a].findIndex((letter, index) => letter !== b[index]);
  return at >= 0 && a[at] === b[at + 1] && a[at + 1] === b[at] && a.slice(at + 2) === b.slice(at + 2);
}

// What Kubernetes sets for each Service of the namespace (`OPA_PORT=tcp://10.0.0.7:8181`).
const SERVICE_LINK = /^(tcp|udp|sctp):\/\//;

/**
 * The variables of `env` that are no setting of the schema but look like a misspelling of one: the
 * same but for case or a plural, two neighbouring letters swapped, or a letter apart (`CORS_ORIGIN`
 * for `CORS_ORIGINS`, `CROS_ORIGINS`, `DATABASE_URI` for `DATABASE_URL`). The service ignores them,
 * and warns at start. Two letters apart would flag names a platform sets (Kubernetes' `API_PORT` of a
 * Service named api, for `OPS_PORT`); its Service variables are left out.
 */
export function misspelledVariables(
  schema: TObject,
  env: NodeJS.ProcessEnv,
): { name: string; meant: string }[] {
  const names = variablesOf(schema).map((leaf) => leaf.name);
  return Object.entries(env).flatMap(([name, value]) => {
    if (names.includes(name) || !/^[A-Za-z][A-Za-z0-9_]{3,}$/.test(name) || SERVICE_LINK.test(value ?? ''))
      return [];
    const upper = name.toUpperCase();
    const form = singular(name);
    const meant =
      names.find((known) => singular(known) === form || swapped(known, upper)) ??
      closestMatch(upper, names, { maxDistance: 1 });
    return meant === undefined ? [] : [{ name, meant }];
  });
}

/** What a misspelled variable (`misspelledVariables`) is told as. */
export const misspelling = ({ name, meant }: { name: string; meant: string }): string =>
  `${name} is no setting of Tessera and is ignored: did you mean ${meant}?`;

/** Warns once per misspelled variable (`misspelledVariables`), in the service's own log. */
export function warnMisspelledVariables(
  log: { warn(fields: object, message: string): void },
  schema: TObject,
  env: NodeJS.ProcessEnv,
): void {
  for (const variable of misspelledVariables(schema, env))
    log.warn({ variable: variable.name, meant: variable.meant }, misspelling(variable));
}

/** Production's non-negotiables: each group needs one of its variables set in the environment. */
export function requireInProduction(env: NodeJS.ProcessEnv, groups: ReadonlyArray<readonly string[]>): void {
  if (env.APP_ENV !== 'production') return;
  for (const names of groups) {
    if (!names.some((name) => env[name])) {
      throw new ConfigError(
        `Invalid configuration: ${names.join(' or ')} is required when APP_ENV=production`,
      );
    }
  }
}

/** A setting parsed further than its schema says: the parser's error becomes the one-line ConfigError. */
export function parseSetting<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${(error as Error).message}`);
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

/**
 * A start-up step (connecting, listening), or the end of the process with one line saying which
 * step failed and why (exit code 1): `Tessera gateway failed to start: OPS_HOST, OPS_PORT: listen
 * EADDRNOTAVAIL …`.
 */
export async function startOrExit<T>(service: string, step: string, start: Promise<T>): Promise<T> {
  try {
    return await start;
  } catch (error) {
    // With its cause, which says why a dependency is unavailable (`database "x" does not exist`).
    const { message, cause } = error as Error;
    const why = cause instanceof Error ? `${message}: ${cause.message}` : message;
    console.error(`Tessera ${service} failed to start: ${step}${why}`);
    process.exit(1);
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/**
 * The README's table of a configuration schema: one row per variable with its default and meaning.
 * The services' tests compare it with the README, so the documentation cannot drift.
 */
export function configTable(schema: TObject): string {
  const rows = variablesOf(schema).map(({ name, schema: { default: value, description } }) => {
    // Defaults under the home folder are shown as ~, so the table reads the same on every machine.
    const text = typeof value === 'string' ? value.replace(homedir(), '~') : JSON.stringify(value);
    const shown = value === undefined || value === '' ? '—' : `\`${text}\``;
    return `| \`${name}\` | ${shown} | ${description ?? ''} |`;
  });
  return ['| Variable | Default | Meaning |', '| --- | --- | --- |', ...rows].join('\n');
}

/**
 * The part of a README between `<!-- name -->` and `<!-- /name -->`, trimmed. With `replacement`
 * (tests run with UPDATE_README=1) the part is rewritten first.
 */
export function readmeSection(file: string, name: string, replacement?: string): string | undefined {
  const readme = readFileSync(file, 'utf8');
  const [open, close] = [`<!-- ${name} -->`, `<!-- /${name} -->`];
  const start = readme.indexOf(open);
  const end = readme.indexOf(close);
  if (start < 0 || end < start) return undefined;
  if (replacement !== undefined) {
    writeFileSync(file, `${readme.slice(0, start + open.length)}\n${replacement}\n${readme.slice(end)}`);
    return replacement;
  }
  return readme.slice(start + open.length, end).trim();
}
