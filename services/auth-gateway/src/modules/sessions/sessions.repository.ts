import {
  type Compilable,
  type ExpressionBuilder,
  type Kysely,
  type QueryCreator,
  type Selectable,
  sql,
} from 'kysely';
import type { Database, SessionsTable } from '../../database.ts';
import { prepareQuery } from '../../prepared.ts';
import type { SecurityEventType } from '../security-events/event-types.ts';
import type { UserRow } from '../users/user.ts';
import { type UpsertOnSignIn, upsertOnSignInQuery } from '../users/users.repository.ts';

export type SessionRow = Selectable<SessionsTable>;

export type SessionEndReason =
  | 'revoked'
  | 'signed_out'
  | 'logout'
  | 'refresh_token_reuse'
  | 'account_deleted';

interface SignInValues {
  sessionId: string;
  tokenHash: Buffer;
  ipAddress: string;
  userAgent: string | null;
  now: Date;
  expiresAt: Date;
}

// The statements of the hot paths are built and compiled once (prepared.ts); each call brings values.
const signIn = prepareQuery((db: Kysely<Database>, $: UpsertOnSignIn & SignInValues) => {
  const { sessionId, now, expiresAt, ipAddress, userAgent } = $;
  const type: SecurityEventType = 'sign_in';
  return db
    .with('u', () => upsertOnSignInQuery(db, $))
    .with('s', (db) =>
      db
        .insertInto('sessions')
        .columns(['id', 'userId', 'ipAddress', 'userAgent', 'createdAt', 'lastUsedAt', 'expiresAt'])
        .expression((eb) =>
          eb
            .selectFrom('u')
            .select([
              eb.val(sessionId).as('id'),
              'u.id as userId',
              eb.val(ipAddress).as('ipAddress'),
              eb.val(userAgent).as('userAgent'),
              eb.val(now).as('createdAt'),
              eb.val(now).as('lastUsedAt'),
              eb.val(expiresAt).as('expiresAt'),
            ]),
        )
        .returning(['id', 'userId']),
    )
    .with('t', (db) =>
      db
        .insertInto('refreshTokens')
        .columns(['tokenHash', 'sessionId', 'issuedAt', 'expiresAt'])
        .expression((eb) =>
          eb
            .selectFrom('s')
            .select([
              eb.val($.tokenHash).as('tokenHash'),
              's.id as sessionId',
              eb.val(now).as('issuedAt'),
              eb.val(expiresAt).as('expiresAt'),
            ]),
        ),
    )
    .with('e', (db) =>
      db
        .insertInto('securityEvents')
        .columns(['type', 'userId', 'sessionId', 'ipAddress', 'userAgent', 'createdAt'])
        .expression((eb) =>
          eb
            .selectFrom('s')
            .select([
              eb.val(type).as('type'),
              's.userId',
              's.id as sessionId',
              eb.val(ipAddress).as('ipAddress'),
              eb.val(userAgent).as('userAgent'),
              eb.val(now).as('createdAt'),
            ]),
        ),
    )
    .selectFrom('u')
    .selectAll();
});

/**
 * A sign-in as one statement, one round trip and one commit: the user's upsert (the users module's
 * query, whose rules stand: only `last_login` changes for a returning user), the session, its
 * refresh token and the `sign_in` security event. It spans modules so that Postgres sees one
 * statement; the event row is the one `SecurityLog.record` would write. Answers the user's row, or
 * nothing, and writes nothing, when the account's deletion is due.
 */
export function insertSignIn(
  db: Kysely<Database>,
  user: UpsertOnSignIn,
  values: SignInValues,
): Promise<UserRow | undefined> {
  return signIn.first(db, { ...user, ...values });
}

const refreshToken = prepareQuery((db: Kysely<Database>, $: { tokenHash: Buffer }) =>
  db
    .selectFrom('refreshTokens as t')
    .innerJoin('sessions as s', 's.id', 't.sessionId')
    .innerJoin('users as u', 'u.id', 's.userId')
    .select([
      't.sessionId',
      't.issuedAt',
      't.expiresAt',
      't.rotatedAt',
      't.successorSealed',
      's.userId',
      's.endedAt as sessionEndedAt',
      'u.roles',
      // By Postgres's clock, which stamped the rotation: every gateway measures the same.
      sql<number | null>`extract(epoch from clock_timestamp() - t.rotated_at)::float8`.as(
        'secondsSinceRotation',
      ),
    ])
    .where('t.tokenHash', '=', $.tokenHash),
);

/**
 * A refresh token with its session and user, when it was issued (by the clock of the gateway that
 * issued it) and how long ago it was rotated (if it was).
 */
export function findRefreshToken(db: Kysely<Database>, tokenHash: Buffer) {
  return refreshToken.first(db, { tokenHash });
}

interface Rotation {
  tokenHash: Buffer;
  successorHash: Buffer;
  successorSealed: Buffer;
  now: Date;
  expiresAt: Date;
}

const rotation = prepareQuery((db: Kysely<Database>, $: Rotation) => {
  const { now, expiresAt } = $;
  return db
    .with('t', (db) =>
      db
        .updateTable('refreshTokens')
        .set({ rotatedAt: sql<Date>`clock_timestamp()`, successorSealed: $.successorSealed })
        .where('tokenHash', '=', $.tokenHash)
        .where('rotatedAt', 'is', null)
        .where('expiresAt', '>', now)
        .returning('sessionId'),
    )
    .with('s', (db) =>
      db
        .updateTable('sessions')
        .set({ lastUsedAt: now, expiresAt })
        .where('id', '=', (eb) => eb.selectFrom('t').select('t.sessionId'))
        .where('endedAt', 'is', null)
        .returning(['id', 'userId']),
    )
    .with('n', (db) =>
      db
        .insertInto('refreshTokens')
        .columns(['tokenHash', 'sessionId', 'issuedAt', 'expiresAt'])
        .expression((eb) =>
          eb
            .selectFrom('s')
            .select([
              eb.val($.successorHash).as('tokenHash'),
              's.id as sessionId',
              eb.val(now).as('issuedAt'),
              eb.val(expiresAt).as('expiresAt'),
            ]),
        ),
    )
    .selectFrom('s')
    .innerJoin('users as u', 'u.id', 's.userId')
    .select(['s.id as sessionId', 's.userId', 'u.roles']);
});

/**
 * Rotates a refresh token that is neither rotated nor expired and whose session is open, in one
 * statement: marks it rotated (by Postgres's clock as the statement rotates it, on which the grace
 * window is measured) with its sealed successor, extends the session, inserts the successor (issued
 * `now`, as its pair).
 * Answers nothing when the token was not rotatable; the caller then looks at why.
 *
 * The token's row is locked first: of parallel refreshes of one token one rotates, the others wait
 * and find it rotated. The session's row next: a revocation holding it wins, and this statement
 * extends no ended session and issues no successor for it (the token stays marked rotated, which
 * changes nothing for an ended session).
 */
export function rotateRefreshToken(db: Kysely<Database>, values: Rotation) {
  return rotation.first(db, values);
}

const endOne = prepareQuery(
  (db: Kysely<Database>, $: { sessionId: string; endedAt: Date; reason: SessionEndReason }) =>
    db
      .updateTable('sessions')
      .set({ endedAt: $.endedAt, endReason: $.reason })
      .where('id', '=', $.sessionId)
      .where('endedAt', 'is', null),
);

/** Ends a session if it is still open; returns whether this call ended it. */
export async function endSession(
  db: Kysely<Database>,
  sessionId: string,
  endedAt: Date,
  reason: SessionEndReason,
): Promise<boolean> {
  const { numAffectedRows = 0n } = await endOne.execute(db, { sessionId, endedAt, reason });
  return numAffectedRows > 0n;
}

/**
 * A condition that locks the user's row (`FOR KEY SHARE`, as the event's foreign key would) before
 * the statement locks any of the user's sessions: the account's deletion locks the account, then its
 * sessions, and an ending that took them the other way round would deadlock with it.
 */
const accountLocked = (userId: string) => (eb: ExpressionBuilder<Database, 'sessions'>) =>
  eb.exists(eb.selectFrom('users').select('users.id').where('users.id', '=', userId).forKeyShare());

/**
 * Who ends sessions, from where, when: the values of the security event written with the ending (no
 * address for an operator's command).
 */
interface Ending {
  userId: string;
  ipAddress: string | null;
  userAgent: string | null;
  now: Date;
}

/**
 * Whether the ending statement also writes its security event. Without it (`false`), only for a
 * retry when the event's row was refused: the user's action stands without its record.
 */
type WithEvent = boolean;

/** The values of ending one session: who, from where, when, why, and the event's `details` as JSON text. */
export type EndOne = Ending & { reason: SessionEndReason; details: string };

/** An ending statement prepared twice, with its event and without it (`WithEvent` picks one). */
function prepareEnding<A extends object, O>(
  build: (db: Kysely<Database>, $: A, event: WithEvent) => Compilable<O>,
) {
  const withEvent = prepareQuery((db: Kysely<Database>, $: A) => build(db, $, true));
  const alone = prepareQuery((db: Kysely<Database>, $: A) => build(db, $, false));
  return (event: WithEvent) => (event ? withEvent : alone);
}

/** One session found for ending: still `open` (unended and unexpired) as the statement found it. */
interface EndTarget {
  sessionId: string;
  userId: string;
  endedAt: Date | null;
  open: boolean;
}

/**
 * Ends the session in `target` if it is open and the user's, with its `session_revoked` event
 * (`details` as JSON text; the row `SecurityLog.record` would write), in the statement that found
 * it. Answers the target and whether this statement ended it.
 */
function endTarget(db: QueryCreator<Database & { target: EndTarget }>, $: EndOne, event: WithEvent) {
  const type: SecurityEventType = 'session_revoked';
  const ending = db.with('ended', (db) =>
    db
      .updateTable('sessions')
      .set({ endedAt: $.now, endReason: $.reason })
      .where('id', '=', (eb) =>
        eb
          .selectFrom('target')
          .select('target.sessionId')
          .where('target.open', '=', true)
          .where('target.userId', '=', $.userId),
      )
      .where('endedAt', 'is', null)
      .where(accountLocked($.userId))
      .returning(['id', 'userId']),
  );
  const recorded = () =>
    ending.with('event', (db) =>
      db
        .insertInto('securityEvents')
        .columns(['type', 'userId', 'sessionId', 'ipAddress', 'userAgent', 'details', 'createdAt'])
        .expression((eb) =>
          eb
            .selectFrom('ended')
            .select([
              eb.val(type).as('type'),
              'ended.userId',
              'ended.id as sessionId',
              eb.val($.ipAddress).as('ipAddress'),
              eb.val($.userAgent).as('userAgent'),
              eb.cast<string>(eb.val($.details), 'jsonb').as('details'),
              eb.val($.now).as('createdAt'),
            ]),
        ),
    );
  // The event's CTE is referenced by nothing after it: either creator builds the same final select.
  return (event ? recorded() : ending)
    .selectFrom('target')
    .select((eb) => [
      'target.sessionId',
      'target.userId',
      'target.endedAt',
      eb.exists(eb.selectFrom('ended').select('ended.id')).$castTo<boolean>().as('ended'),
    ]);
}

const revokeByToken = prepareEnding((db, $: EndOne & { tokenHash: Buffer }, event) =>
  endTarget(
    db.with('target', (db) =>
      db
        .selectFrom('refreshTokens as t')
        .innerJoin('sessions as s', 's.id', 't.sessionId')
        .select((eb) => [
          't.sessionId',
          's.userId',
          's.endedAt',
          // Rotated or not: a client whose refresh answer was lost signs out with the token it holds.
          eb.and([eb('s.endedAt', 'is', null), eb('s.expiresAt', '>', $.now)]).as('open'),
        ])
        .where('t.tokenHash', '=', $.tokenHash),
    ),
    $,
    event,
  ),
);

/**
 * Ends the session of a refresh token, current or rotated away, when the session is open and
 * `userId`'s, and records its `session_revoked` event: one statement, one commit. Answers
 * the token's session (nothing for an unknown token) and whether this statement ended it.
 */
export function revokeSessionByToken(
  db: Kysely<Database>,
  values: EndOne & { tokenHash: Buffer },
  event: WithEvent,
) {
  return revokeByToken(event).first(db, values);
}

const endById = prepareEnding((db, $: EndOne & { sessionId: string }, event) =>
  endTarget(
    db.with('target', (db) =>
      db
        .selectFrom('sessions')
        .select((eb) => [
          'id as sessionId',
          'userId',
          'endedAt',
          eb.and([eb('endedAt', 'is', null), eb('expiresAt', '>', $.now)]).as('open'),
        ])
        .where('id', '=', $.sessionId)
        .where('userId', '=', $.userId),
    ),
    $,
    event,
  ),
);

/** The same for one of `userId`'s sessions by its id: nothing when the user has no such session. */
export function endSessionOfUser(
  db: Kysely<Database>,
  values: EndOne & { sessionId: string },
  event: WithEvent,
) {
  return endById(event).first(db, values);
}

/**
 * A logout's values: `sessionId`, the session that asked (null for an operator's), and
 * `startedBefore`, for an operator's, leaves the sessions started after it.
 */
type LogoutAll = Ending & { sessionId: string | null; startedBefore: Date | null };

const logoutAll = prepareEnding((db, $: LogoutAll, event) => {
  const type: SecurityEventType = 'logout';
  const reason: SessionEndReason = 'logout';
  const startedBy = (eb: ExpressionBuilder<Database, 'sessions'>) =>
    eb('createdAt', '<=', eb.fn.coalesce(eb.val($.startedBefore), sql<Date>`'infinity'::timestamptz`));
  const ending = db.with('ended', (db) =>
    db
      .updateTable('sessions')
      .set({ endedAt: $.now, endReason: reason })
      .where('userId', '=', $.userId)
      .where('endedAt', 'is', null)
      .where('expiresAt', '>', $.now)
      .where(startedBy)
      .where(accountLocked($.userId))
      .returning('id'),
  );
  // Only a logout that ended a session is an event: one that found none (they had ended, the account
  // erased by the deletion sweep meanwhile) leaves no address behind.
  const recorded = () =>
    ending.with('event', (db) =>
      db
        .insertInto('securityEvents')
        .columns(['type', 'userId', 'sessionId', 'ipAddress', 'userAgent', 'details', 'createdAt'])
        .expression((eb) =>
          eb
            .selectFrom('ended')
            .select((eb) => [
              eb.val(type).as('type'),
              eb.val($.userId).as('userId'),
              eb.cast<string | null>(eb.val($.sessionId), 'uuid').as('sessionId'),
              eb.val($.ipAddress).as('ipAddress'),
              eb.val($.userAgent).as('userAgent'),
              eb
                .fn<string>('jsonb_build_object', [sql.lit('revokedSessions'), eb.fn.countAll()])
                .as('details'),
              eb.val($.now).as('createdAt'),
            ])
            .having((eb) => eb.fn.countAll(), '>', 0),
        ),
    );
  return (event ? recorded() : ending).selectNoFrom((eb) => [
    eb
      .selectFrom('ended')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .as('ended'),
    sql<string[]>`array(${eb
      .selectFrom('sessions')
      .select('id')
      .where('userId', '=', $.userId)
      .where('expiresAt', '>', $.now)
      .where(startedBy)})`.as('unexpired'),
  ]);
});

/**
 * Ends every active session of a user (open, not expired; for an operator's, started by
 * `startedBefore`) and, when it ended any, records the `logout` event with their number, in one
 * statement. Answers how many it ended and the ids of all those unexpired sessions, ended now or
 * before, whose Redis keys must go (a retry repairs a failed delete).
 */
export async function logoutEverywhere(
  db: Kysely<Database>,
  values: LogoutAll,
  event: WithEvent,
): Promise<{ ended: number; unexpired: string[] }> {
  const { ended, unexpired } = await logoutAll(event).firstOrThrow(db, values);
  return { ended: Number(ended), unexpired };
}

/**
 * Up to `limit` users after `after` (by id) with a session unexpired at `now` that started by
 * `startedBefore`, ended or not: an operator's ending of every session goes through them in turns,
 * each turn reading on from the last, and stops at the sessions started since. Ended ones count, so
 * that a second run deletes the Redis keys a first one could not.
 */
export async function usersWithUnexpiredSessions(
  db: Kysely<Database>,
  {
    after,
    now,
    startedBefore,
    limit,
  }: { after: string | null; now: Date; startedBefore: Date; limit: number },
): Promise<string[]> {
  let query = db
    .selectFrom('sessions')
    .select('userId')
    .distinct()
    .where('expiresAt', '>', now)
    .where('createdAt', '<=', startedBefore)
    .orderBy('userId')
    .limit(limit);
  if (after !== null) query = query.where('userId', '>', after);
  return (await query.execute()).map((row) => row.userId);
}

/**
 * The open sessions (not ended, unexpired at `now`) that an operator's ending would end, and of how
 * many users: of `userId` alone, or of everyone, started by `startedBefore`. For a dry run.
 */
export async function openSessionCount(
  db: Kysely<Database>,
  { userId, now, startedBefore }: { userId?: string; now: Date; startedBefore?: Date },
): Promise<{ sessions: number; users: number }> {
  let query = db
    .selectFrom('sessions')
    .select((eb) => [
      eb.fn.countAll<string>().as('sessions'),
      eb.fn.count<string>('userId').distinct().as('users'),
    ])
    .where('endedAt', 'is', null)
    .where('expiresAt', '>', now);
  if (userId !== undefined) query = query.where('userId', '=', userId);
  if (startedBefore !== undefined) query = query.where('createdAt', '<=', startedBefore);
  const { sessions, users } = await query.executeTakeFirstOrThrow();
  return { sessions: Number(sessions), users: Number(users) };
}

const userSession = prepareQuery((db: Kysely<Database>, $: { userId: string; sessionId: string }) =>
  db.selectFrom('sessions').selectAll().where('id', '=', $.sessionId).where('userId', '=', $.userId),
);

export function findUserSession(db: Kysely<Database>, userId: string, sessionId: string) {
  return userSession.first(db, { userId, sessionId });
}

const activeOf = (db: Kysely<Database>, userId: string, now: Date) =>
  db
    .selectFrom('sessions')
    .where('userId', '=', userId)
    .where('endedAt', 'is', null)
    .where('expiresAt', '>', now);

const activePage = prepareQuery(
  (db: Kysely<Database>, $: { userId: string; now: Date; limit: number; offset: number }) =>
    activeOf(db, $.userId, $.now)
      .selectAll()
      .select((eb) => eb.fn.countAll<string>().over().as('totalItems'))
      .orderBy('createdAt', 'desc')
      .orderBy('id', 'desc')
      .limit($.limit)
      .offset($.offset),
);

/**
 * One page of the user's active sessions, newest first (`id` breaks ties, so the order is total),
 * and how many there are, in the same statement: one scan of the index `sessions_user_active_idx`,
 * in its order. A page past the end has no row to carry the count, which then costs a second query.
 */
export async function listActiveSessions(
  db: Kysely<Database>,
  userId: string,
  now: Date,
  page: { limit: number; offset: number },
): Promise<{ sessions: SessionRow[]; totalItems: number }> {
  const rows = await activePage.rows(db, { userId, now, ...page });
  const first = rows[0];
  if (first)
    return { sessions: rows.map(({ totalItems: _, ...row }) => row), totalItems: Number(first.totalItems) };
  if (page.offset === 0) return { sessions: [], totalItems: 0 };
  const { count } = await activeOf(db, userId, now)
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .executeTakeFirstOrThrow();
  return { sessions: [], totalItems: Number(count) };
}
