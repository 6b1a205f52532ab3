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
    db
      .insertInto('securityEvents')
      .values({
        type: $.type,
        // Locked: an account being erased meanwhile is read once erased (its address gone), so that
        // the event, with where it came from, does not land on it after its events were anonymized.
        userId: (eb) => eb.selectFrom('users').select('id').where('email', '=', $.email).forKeyShare(),
        sessionId: $.sessionId,
        ipAddress: $.ipAddress,
        userAgent: $.userAgent,
        details: $.details,
        createdAt: $.createdAt,
      })
      .returning('userId'),
);

/**
 * Appends one event: of the account `userId`, or of the account of `email` if there is one. Answers
 * the account it was recorded under (null: none).
 */
export async function insertSecurityEvent(
  db: Kysely<Database>,
  row: Omit<EventRow, 'userId'> & ({ userId: string | null } | { email: string }),
): Promise<string | null> {
  if ('email' in row) return (await insertEventOfEmail.firstOrThrow(db, row)).userId;
  await insertEvent.execute(db, row);
  return row.userId;
}

const ofUser = (db: Kysely<Database>, userId: string) =>
  db.selectFrom('securityEvents').where('userId', '=', userId);

/**
 * One page of the user's events, newest first (`id` breaks ties, so the order is total), and how
 * many there are, both read in one snapshot: the count agrees with the page while events are added.
 * Two statements, each through the index `security_events_user_idx` (the count without reading
 * the rows), rather than a count over the page's statement, which reads every event of the user.
 */
export function listEvents(db: Kysely<Database>, userId: string, page: { limit: number; offset: number }) {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const { count } = await ofUser(trx, userId)
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .executeTakeFirstOrThrow();
      const events = await ofUser(trx, userId)
        .select(['id', 'type', 'createdAt', 'ipAddress', 'userAgent', 'sessionId'])
        .orderBy('createdAt', 'desc')
        .orderBy('id', 'desc')
        .limit(page.limit)
        .offset(page.offset)
        .execute();
      return { events, totalItems: Number(count) };
    });
}
