import { misspelling } from '@tessera/config';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { systemClock } from './clock.ts';
import {
  loadOperatorConfig,
  misspelledOperatorVariables,
  type OperatorConfig,
  type OperatorSection,
} from './config.ts';
import { loggerOptions } from './logging.ts';
import db from './plugins/db.ts';
import mailQueue from './plugins/mail-queue.ts';
import redis from './plugins/redis.ts';

export interface OperatorCommand<Args, S extends OperatorSection> {
  /** How its failures begin: `sessions end`. */
  name: string;
  usage: string;
  /** Reads the arguments; throws a usage error. */
  parse: (argv: string[]) => Args;
  /**
   * What it reads of the gateway's configuration besides Redis: `database` (and gets Postgres), `otp`,
   * `queue` (and gets the mail queue), `rateLimit`.
   */
  reads: S[];
  /** The command itself; answers its exit code. */
  run: (args: Args, app: FastifyInstance, config: OperatorConfig<S>) => Promise<number>;
  /** What a failure adds to its line, e.g. how far it got. */
  sofar?: (error: unknown) => string;
}

/**
 * An operator's command on the gateway's own clients, read from the gateway's configuration (only
 * what it uses: see loadOperatorConfig), with their checks at start. Their log lines go to stderr,
 * errors only: a gateway's warnings at start (Redis's durability, …) are not the command's business
 * (`LOG_LEVEL=debug` shows every line). Exit code: the command's, 1 when a dependency or the
 * configuration fails (one line of its own on stderr), 2 on a usage error; `--help` prints the usage.
 * A variable that looks like a misspelling of a setting it reads is told on stderr, as a gateway
 * warns of it at start.
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
    // First: the configuration's error may be the misspelling's.
    for (const variable of misspelledOperatorVariables(env, command.reads))
      console.error(`${command.name}: ${misspelling(variable)}`);
    const config = loadOperatorConfig(env, command.reads);
    const quiet = !['debug', 'trace', 'fatal', 'silent'].includes(config.log.level);
    const log = quiet ? { ...config.log, level: 'error' as const } : config.log;
    app = Fastify({ logger: loggerOptions({ ...config, log }, pino.destination(2)) });
    const { database } = config as Partial<OperatorConfig<'database'>>;
    if (database) await app.register(db, database);
    await app.register(redis, { ...config.redis, now: () => systemClock.now().getTime() });
    const { mail } = config as Partial<OperatorConfig<'queue'>>;
    if (mail)
      await app.register(mailQueue, { redis: config.redis, prefix: mail.queuePrefix, readOnly: true });
    await app.ready();
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
