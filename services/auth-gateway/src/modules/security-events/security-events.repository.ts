import type { Kysely } from 'kysely';
import type { Database } from '../../database.ts';

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
