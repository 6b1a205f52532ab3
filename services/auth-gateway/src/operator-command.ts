import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { systemClock } from './clock.ts';
import { loadOperatorConfig, type OperatorConfig, type OperatorSection } from './config.ts';
import { loggerOptions } from './logging.ts';
import { gatewaysRunning, OTP_SECRET_WINDOW } from './modules/sign-in/otp-secret-check.ts';
import db from './plugins/db.ts';
import redis from './plugins/redis.ts';

export interface OperatorCommand<Args, S extends OperatorSection> {
  /** How its failures begin: `sessions end`. */
  name: string;
  usage: string;
  /** Reads the arguments; throws a usage error. */
  parse: (argv: string[]) => Args;
  /** What it reads of the gateway's configuration besides Redis: `database` (and gets Postgres), `otp`. */
  reads: S[];
  /** The command itself; answers its exit code. */
  run: (args: Args, app: FastifyInstance, config: OperatorConfig<S>) => Promise<number>;
  /** What a failure adds to its line, e.g. how far it got. */
  sofar?: (error: unknown) => string;
}

/**
 * An operator's command on the gateway's own clients, read from the gateway's configuration (only
 * what it uses: see loadOperatorConfig), with their checks at start. Their log lines go to stderr, errors only: a gateway's warnings at start
 * (Redis's durability, …) are not the command's business (`LOG_LEVEL=debug` shows every line). It
 * runs only where a gateway of its Redis key prefix has run within minutes. Exit code: the command's,
 * 1 when a dependency or the configuration fails, or no gateway ran there (one line of its own on
 * stderr), 2 on a usage error; `--help` prints the usage.
 */
export async function runOperatorCommand<Args, S extends OperatorSection>(
  command: OperatorCommand<Args, S>,
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(command.usage);
    return 0;
  }
  let args: Args;
  try {
    args = command.parse(argv);
  } catch (error) {
    console.error(`${(error as Error).message}\n${command.usage}`);
    return 2;
  }
  let app: FastifyInstance | undefined;
  try {
    const config = loadOperatorConfig(env, command.reads);
    const quiet = !['debug', 'trace', 'fatal', 'silent'].includes(config.log.level);
    const log = quiet ? { ...config.log, level: 'error' as const } : config.log;
    app = Fastify({ logger: loggerOptions({ ...config, log }, pino.destination(2)) });
    const { database } = config as Partial<OperatorConfig<'database'>>;
    if (database) await app.register(db, database);
    await app.register(redis, { ...config.redis, now: () => systemClock.now().getTime() });
    await app.ready();
    // Keys under another Redis or prefix than the gateways' would be none of theirs: an ending that
    // found no key would leave the access tokens working while it said it ended their sessions.
    if (!(await gatewaysRunning(app.redis))) {
      console.error(
        `${command.name}: no gateway ran on this Redis with REDIS_KEY_PREFIX "${config.redis.keyPrefix}" in the last ${OTP_SECRET_WINDOW / 60} minutes: give the command the gateways' REDIS_URL (REDIS_CLUSTER_NODES) and REDIS_KEY_PREFIX, and start a gateway first if none runs`,
      );
      return 1;
    }
    return await command.run(args, app, config);
  } catch (error) {
    const { message, cause } = error as Error;
    const why = cause instanceof Error ? `: ${cause.message}` : '';
    console.error(`${command.name}: ${message.split('\n')[0]}${why}${command.sofar?.(error) ?? ''}`);
    return 1;
  } finally {
    await app?.close();
  }
}
