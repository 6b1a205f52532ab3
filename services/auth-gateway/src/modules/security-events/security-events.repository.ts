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

export async function countEvents(db: Kysely<Database>, userId: string): Promise<number> {
  const { count } = await ofUser(db, userId)
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(count);
}

/** Newest first; `id` breaks ties so pages never repeat or skip an event. */
export function listEvents(db: Kysely<Database>, userId: string, page: { limit: number; offset: number }) {
  return ofUser(db, userId)
    .select(['id', 'type', 'createdAt', 'ipAddress', 'userAgent', 'sessionId'])
    .orderBy('createdAt', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
}
