import type { Kysely, Transaction, Updateable } from 'kysely';
import type { Database, UsersTable } from '../../database.ts';
import type { UserRow } from './user.ts';

/** Where a new account came from, stored only by the sign-in that creates it. */
export interface Signup {
  signupSource?: string | undefined;
  signupCampaign?: string | undefined;
}

/**
 * Finds the user of `email` or creates it on first sign-in; records the sign-in time either way. A
 * returning user's row changes in `last_login` only. A query, not a call: the sign-in statement
 * (sessions.repository.ts) runs it as its first step, with the session's inserts.
 */
export function upsertOnSignIn(db: Kysely<Database>, email: string, now: Date, signup: Signup = {}) {
  return db
    .insertInto('users')
    .values({ email, ...signup, lastLogin: now, createdAt: now, updatedAt: now })
    .onConflict((oc) => oc.column('email').doUpdateSet((eb) => ({ lastLogin: eb.ref('excluded.lastLogin') })))
    .returningAll();
}

export type UpsertOnSignIn = ReturnType<typeof upsertOnSignIn>;

export function findUser(db: Kysely<Database>, id: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The user's row, locked until the transaction ends: profile changes of one user take turns. */
export function lockUser(trx: Transaction<Database>, id: string): Promise<UserRow | undefined> {
  return trx.selectFrom('users').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
}

export function updateUser(
  trx: Transaction<Database>,
  id: string,
  changes: Updateable<UsersTable>,
): Promise<UserRow> {
  return trx.updateTable('users').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}
