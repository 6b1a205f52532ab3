import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { isCalendarTime } from './calendar.ts';
import { systemClock } from './clock.ts';
import type { OperatorConfig } from './config.ts';
import { createActiveSessionStore } from './modules/sessions/active-sessions.store.ts';
import { logoutEverywhere } from './modules/sessions/end.ts';
import { openSessionCount, usersWithUnexpiredSessions } from './modules/sessions/sessions.repository.ts';
import { normalizeEmail } from './modules/sign-in/email-address.ts';
import { findUser, findUserByEmail } from './modules/users/users.repository.ts';
import { runOperatorCommand } from './operator-command.ts';
import { isUuid } from './uuid.ts';

const USAGE = `usage: sessions-cli.ts end --user <email or user id> [--dry-run] [--json]
       sessions-cli.ts end --all [--started-before <time>] [--dry-run] [--json]
Reads the gateway's DATABASE_* and Redis settings (REDIS_URL, REDIS_CLUSTER_NODES, REDIS_KEY_PREFIX), and prints how
many keys (the access tokens' hold) it deleted there. Having ended sessions and found none of their keys (another Redis
or prefix than the gateways', or Redis lost them), it says so, with exit code 1.
--user ends every session of one account, and prints the account's id and address.
--all ends the sessions started before it ran, or before --started-before (ISO 8601, with its offset): give a run
that failed the time it printed, so that running it again leaves the sessions started since.
--dry-run ends nothing: it prints what would end (with --all, and its cut-off to end exactly those).`;

/** How an operator's ending shows in the user's security events: a `logout` with no address. */
const OPERATOR = { ipAddress: null, userAgent: 'Tessera operator (sessions:end)', sessionId: null };

/** Users ended at a time, in --all: each is one statement and its Redis keys. */
const USERS_AT_ONCE = 16;

interface EndReport {
  /** Accounts whose sessions it ended, or (--dry-run) would end; --user: the one account. */
  users: number;
  sessionsEnded: number;
  /** --dry-run: nothing ended; the open sessions that would have, of `users` accounts. */
  dryRun?: true;
  sessionsToEnd?: number;
  /** --user: the account it found, so that the operator sees it was the one meant. */
  userId?: string;
  email?: string;
  /** --all: the sessions started after it are left. */
  startedBefore?: string;
  /** Redis keys of unexpired sessions deleted, ended now or before (a repair finds those a run left). */
  keysDeleted?: number;
}

/**
 * An operator's sign-out (package script `sessions:end`): every session of one account, or every
 * session started before a cut-off (the command's start, or `--started-before`), ended in
 * Postgres, then the Redis keys of those unexpired sessions deleted (their access tokens refused),
 * each account's ending recorded as its `logout` event. As the user's own "log out everywhere" does
 * it, in that order: a key deleted first could come back with a refresh before the session had
 * ended. Running it again with the same cut-off repairs a run that Redis failed. It says how many
 * keys it deleted. Exit code 0 when done, 1 when a dependency or the configuration fails (a line of
 * its own on stderr, with how far --all got and its cut-off) or when it ended sessions and found
 * none of their keys, 2 on a usage error or an account not found.
 */
export function runSessionsCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return runOperatorCommand(
    {
      name: 'sessions end',
      usage: USAGE,
      parse,
      reads: ['database'],
      run: endSessions,
      sofar(error) {
        const done = (error as { report?: EndReport }).report;
        return done
          ? ` (${done.sessionsEnded} sessions of ${done.users} accounts ended before it; run it again with --started-before ${done.startedBefore})`
          : '';
      },
    },
    argv,
    env,
  );
}

async function endSessions(
  args: ReturnType<typeof parse>,
  app: FastifyInstance,
  config: OperatorConfig<'database'>,
): Promise<number> {
  const end = logoutEverywhere({
    db: app.db,
    clock: systemClock,
    activeSessions: createActiveSessionStore(app.redis),
    log: app.log,
  });

  // With --all, the cut-off: the command's start unless given.
  const startedBefore = args.startedBefore ?? systemClock.now();
  let report: EndReport;
  if (args.user !== undefined) {
    const user = isUuid(args.user)
      ? await findUser(app.db, args.user)
      : await findUserByEmail(app.db, normalizeEmail(args.user));
    if (user === undefined) {
      console.error(`sessions end: no account of ${args.user}`);
      return 2;
    }
    const account = { userId: user.id, email: user.email };
    if (args.dryRun) report = { ...(await dryRun(app.db, { userId: user.id })), users: 1, ...account };
    else {
      const { ended, keysDeleted } = await end(user.id, OPERATOR);
      report = { users: 1, sessionsEnded: ended, ...account, keysDeleted };
    }
  } else if (args.dryRun) {
    report = { ...(await dryRun(app.db, { startedBefore })), startedBefore: startedBefore.toISOString() };
  } else {
    const all = { users: 0, sessionsEnded: 0, startedBefore: startedBefore.toISOString(), keysDeleted: 0 };
    report = all;
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
      const ended = await Promise.allSettled(users.map((userId) => end(userId, OPERATOR, startedBefore)));
      for (const each of ended)
        if (each.status === 'fulfilled') {
          // Accounts gone through but with none open (their keys deleted again) are not counted.
          if (each.value.ended > 0) all.users += 1;
          all.sessionsEnded += each.value.ended;
          all.keysDeleted += each.value.keysDeleted;
        }
      const failed = ended.find((each) => each.status === 'rejected');
      // Stops at the first failure, saying how far it got: running it again ends the rest.
      if (failed) throw Object.assign(failed.reason as Error, { report: all });
    }
  }
  const accounts = report.userId
    ? `account ${report.userId}, ${report.email}`
    : `${report.users} ${report.users === 1 ? 'account' : 'accounts'}`;
  const cutoff = report.startedBefore ? `, started before ${report.startedBefore}` : '';
  const exactly = report.startedBefore
    ? `; to end exactly these: --all --started-before ${report.startedBefore}`
    : '';
  console.log(
    args.json
      ? JSON.stringify(report)
      : report.dryRun
        ? `sessions to end: ${report.sessionsToEnd} (${accounts}${cutoff}); a dry run, nothing ended${exactly}`
        : `sessions ended: ${report.sessionsEnded} (${accounts}${cutoff}); keys deleted: ${report.keysDeleted}`,
  );
  // A session it ended was open, so its key was where the gateways keep theirs: none found means
  // another Redis or key prefix than theirs, whose ending leaves the access tokens working.
  if (report.sessionsEnded > 0 && report.keysDeleted === 0) {
    const again = report.startedBefore ? ` with --started-before ${report.startedBefore}` : '';
    console.error(
      `sessions end: ended ${report.sessionsEnded} ${report.sessionsEnded === 1 ? 'session' : 'sessions'} in Postgres, but none of their keys was on this Redis under REDIS_KEY_PREFIX "${config.redis.keyPrefix}": if the gateways keep theirs on another Redis or prefix, those access tokens work until they expire (if Redis lost them, they are refused already); run it again${again} with the gateways' REDIS_URL (REDIS_CLUSTER_NODES) and REDIS_KEY_PREFIX`,
    );
    return 1;
  }
  return 0;
}

/** --dry-run: the open sessions that would end, of how many accounts; nothing is ended. */
async function dryRun(
  database: FastifyInstance['db'],
  scope: { userId?: string; startedBefore?: Date },
): Promise<EndReport> {
  const open = await openSessionCount(database, { ...scope, now: systemClock.now() });
  return { dryRun: true, users: open.users, sessionsEnded: 0, sessionsToEnd: open.sessions };
}

function parse(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      // Given twice, parseArgs keeps the last: an operator ending two accounts would end one.
      user: { type: 'string', multiple: true },
      all: { type: 'boolean', default: false },
      'started-before': { type: 'string', multiple: true },
      json: { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
    },
  });
  if ((values.user?.length ?? 0) > 1 || (values['started-before']?.length ?? 0) > 1)
    throw new Error('give --user (one account at a time) and --started-before once each');
  const user = values.user?.[0];
  if (positionals.join(' ') !== 'end')
    throw new Error(`unknown command: ${positionals.join(' ') || '(none)'}`);
  if ((user === undefined) === !values.all) throw new Error('give either --user or --all');
  const cutoff = values['started-before']?.[0];
  if (cutoff !== undefined && !values.all) throw new Error('--started-before is for --all');
  const startedBefore = cutoff === undefined ? undefined : cutoffTime(cutoff);
  return { user: user?.trim(), startedBefore, json: values.json, dryRun: values['dry-run'] };
}

// ISO 8601 with its offset: without one, a time would be read in this host's time zone.
const WITH_OFFSET = /^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)$/i;

/** The cut-off an operator typed, refused unless it names one instant (JavaScript moves 30 February). */
function cutoffTime(text: string): Date {
  const time = new Date(text);
  if (Number.isNaN(time.getTime())) throw new Error(`--started-before: not a time: ${text}`);
  const parts = WITH_OFFSET.exec(text);
  if (!parts)
    throw new Error(
      `--started-before: give an ISO 8601 time with its offset (2026-11-28T10:00:00Z): ${text}`,
    );
  const [year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0] = parts
    .slice(1, 7)
    .map((part) => Number(part ?? 0));
  if (!isCalendarTime(year, month, day, hour, minute, second))
    throw new Error(`--started-before: no such time: ${text}`);
  return time;
}

if (import.meta.main) process.exitCode = await runSessionsCli(process.argv.slice(2));
