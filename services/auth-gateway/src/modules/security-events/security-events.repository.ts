import type { Kysely } from 'kysely';
import type { Database } from '../../database.ts';
import { prepareQuery } from '../../prepared.ts';
import type { SecurityEventType } from './event-types.ts';

/** A security event's row; `details` as JSON text. */
export interface EventRow {
  type: SecurityEventType;
  userId: string | null;
  sessionId: string | null;
  ipAddress: string;
  userAgent: string | null;
  details: string;
  createdAt: Date;
}

const insertEvent = prepareQuery((db: Kysely<Database>, $: EventRow) =>
  db.insertInto('securityEvents').values({
    type: $.type,
    userId: $.userId,
    sessionId: $.sessionId,
    ipAddress: $.ipAddress,
    userAgent: $.userAgent,
    details: $.details,
    createdAt: $.createdAt,
  }),
);

const insertEventOfEmail = prepareQuery(
  (db: Kysely<Database>, $: Omit<EventRow, 'userId'> & { email: string }) =>
    db.insertInto('securityEvents').values({
      type: $.type,
      // Locked: an account being erased meanwhile is read once erased (its address gone), so that
      // the event, with where it came from, does not land on it after its events were anonymized.
      userId: (eb) => eb.selectFrom('users').select('id').where('email', '=', $.email).forKeyShare(),
      sessionId: $.sessionId,
      ipAddress: $.ipAddress,
      userAgent: $.userAgent,
      details: $.details,
      createdAt: $.createdAt,
    }),
);

/** Appends one event: of the account `userId`, or of the account of `email` if there is one. */
export async function insertSecurityEvent(
  db: Kysely<Database>,
  row: Omit<EventRow, 'userId'> & ({ userId: string | null } | { email: string }),
): Promise<void> {
  if ('email' in row) await insertEventOfEmail.execute(db, row);
  else await insertEvent.execute(db, row);
}

const ofUser = (db: Kysely<Database>, userId: string) =>
  db.selectFrom('securityEvents').where('userId', '=', userId);

/**
 * One page of the user's events, newest first (`id` breaks ties, so the order is total), and how
 * many there are, counted in the same statement: the count and the page agree while events are
 * added. A page past the end has no row to carry the count, which then costs a second query.
 */
export async function listEvents(
  db: Kysely<Database>,
  userId: string,
  page: { limit: number; offset: number },
) {
  const rows = await ofUser(db, userId)
    .select(['id', 'type', 'createdAt', 'ipAddress', 'userAgent', 'sessionId'])
    .select((eb) => eb.fn.countAll<string>().over().as('totalItems'))
    .orderBy('createdAt', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const first = rows[0];
  if (first)
    return { events: rows.map(({ totalItems: _, ...row }) => row), totalItems: Number(first.totalItems) };
  if (page.offset === 0) return { events: [], totalItems: 0 };
  const { count } = await ofUser(db, userId)
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .executeTakeFirstOrThrow();
  return { events: [], totalItems: Number(count) };
}
