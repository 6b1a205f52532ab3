import type { Kysely } from 'kysely';
import type { Database } from '../../database.ts';
import type { UserRow } from './user.ts';

/** Finds the user of `email` or creates it on first sign-in; records the sign-in time either way. */
export function upsertOnSignIn(db: Kysely<Database>, email: string, now: Date): Promise<UserRow> {
  return db
    .insertInto('users')
    .values({ email, lastLogin: now, createdAt: now, updatedAt: now })
    .onConflict((oc) => oc.column('email').doUpdateSet({ lastLogin: now }))
    .returningAll()
    .executeTakeFirstOrThrow();
}
