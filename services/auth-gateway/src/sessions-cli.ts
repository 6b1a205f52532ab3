import { parseArgs } from 'node:util';
import { ConfigError } from '@tessera/config';
import Fastify from 'fastify';
import pino from 'pino';
import { systemClock } from './clock.ts';
import { loadConfig } from './config.ts';
import { loggerOptions } from './logging.ts';
import { createActiveSessionStore } from './modules/sessions/active-sessions.store.ts';
import { logoutEverywhere } from './modules/sessions/end.ts';
import { usersWithUnexpiredSessions } from './modules/sessions/sessions.repository.ts';
import { normalizeEmail } from './modules/sign-in/email-address.ts';
import { findUser, findUserIdByEmail } from './modules/users/users.repository.ts';
import db from './plugins/db.ts';
import redis from './plugins/redis.ts';
import { isUuid } from './uuid.ts';

const USAGE = `usage: sessions-cli.ts end --user <email or user id> [--json]
       sessions-cli.ts end --all [--json]
Reads the gateway's configuration (DATABASE_URL, REDIS_URL, …): run it where a gateway runs.`;

/** How an operator's ending shows in the user's security events: a `logout` with no address. */
const OPERATOR = { ipAddress: null, userAgent: 'Tessera operator (sessions:end)' };

/** Users ended at a time, in --all: each is one statement and its Redis keys. */
const USERS_AT_ONCE = 16;

export interface EndReport {
  users: number;
  sessionsEnded: number;
}

/**
 * An operator's sign-out (package script `sessions:end`): every session of one account, or of every
 * account with an unexpired session that started before the command, ended in Postgres, then the
 * Redis keys of all its unexpired sessions deleted (their access tokens refused), each account's
 * ending recorded as its `logout` event. As the user's own "log out everywhere" does it, in that
 * order: a key deleted first could come back with a refresh before the session had ended. Running
 * it again repairs a run that Redis failed. Exit code 0 when done, 1 when a dependency or the
 * configuration fails (one line on stderr, with how far --all got: run it again), 2 on a usage error
 * or an account not found.
 */
export async function runSessionsCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  let app: ReturnType<typeof Fastify> | undefined;
  try {
    const config = loadConfig(env);
    // The gateway's own clients, with their checks at start; log lines go to stderr.
    app = Fastify({ logger: loggerOptions(config, pino.destination(2)) });
    await app.register(db, config.database);
    await app.register(redis, { ...config.redis, now: () => systemClock.now().getTime() });
    await app.ready();
    const end = logoutEverywhere({
      db: app.db,
      clock: systemClock,
      activeSessions: createActiveSessionStore(app.redis),
      log: app.log,
    });

    let report: EndReport;
    if (args.user !== undefined) {
      const userId = isUuid(args.user)
        ? (await findUser(app.db, args.user))?.id
        : await findUserIdByEmail(app.db, normalizeEmail(args.user));
      if (userId === undefined) {
        console.error(`sessions end: no account of ${args.user}`);
        return 2;
      }
      report = { users: 1, sessionsEnded: await end(userId, OPERATOR) };
    } else {
      report = { users: 0, sessionsEnded: 0 };
      const startedBefore = systemClock.now();
      let after: string | null = null;
      for (;;) {
        const users = await usersWithUnexpiredSessions(app.db, {
          after,
          now: systemClock.now(),
          startedBefore,
          limit: USERS_AT_ONCE,
        });
        if (users.length === 0) break;
        after = users.at(-1) ?? null;
        const ended = await Promise.allSettled(users.map((userId) => end(userId, OPERATOR)));
        for (const each of ended)
          if (each.status === 'fulfilled') {
            report.users += 1;
            report.sessionsEnded += each.value;
          }
        const failed = ended.find((each) => each.status === 'rejected');
        // Stops at the first failure, saying how far it got: running it again ends the rest.
        if (failed) throw Object.assign(failed.reason as Error, { report });
      }
    }
    console.log(
      args.json
        ? JSON.stringify(report)
        : `sessions ended: ${report.sessionsEnded} (${report.users} ${report.users === 1 ? 'account' : 'accounts'})`,
    );
    return 0;
  } catch (error) {
    const message = error instanceof ConfigError ? error.message : (error as Error).message;
    const cause =
      (error as Error).cause instanceof Error ? `: ${((error as Error).cause as Error).message}` : '';
    const done = (error as { report?: EndReport }).report;
    const sofar = done
      ? ` (${done.sessionsEnded} sessions of ${done.users} accounts ended before it; run it again)`
      : '';
    console.error(`sessions end: ${message.split('\n')[0]}${cause}${sofar}`);
    return 1;
  } finally {
    await app?.close();
  }
}

function parse(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      user: { type: 'string' },
      all: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  if (positionals.join(' ') !== 'end')
    throw new Error(`unknown command: ${positionals.join(' ') || '(none)'}`);
  if ((values.user === undefined) === !values.all) throw new Error('give either --user or --all');
  return { user: values.user?.trim(), json: values.json };
}

if (import.meta.main) process.exitCode = await runSessionsCli(process.argv.slice(2));
