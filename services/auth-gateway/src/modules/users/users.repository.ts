import type { Kysely, Transaction, Updateable } from 'kysely';
import type { Database, UsersTable } from '../../database.ts';
import type { UserRow } from './user.ts';

/** Where a new account came from, stored only by the sign-in that creates it. */
export interface Signup {
  signupSource?: string | undefined;
  signupCampaign?: string | undefined;
}

/** A sign-in's user: the values of the upsert that finds or creates it (`upsertOnSignInQuery`). */
export interface UpsertOnSignIn {
  email: string;
  signedInAt: Date;
  signupSource: string | null;
  signupCampaign: string | null;
}

/** The upsert of the user of `email` signing in at `now`; the tags count only for a new account. */
export function upsertOnSignIn(email: string, now: Date, signup: Signup = {}): UpsertOnSignIn {
  return {
    email,
    signedInAt: now,
    signupSource: signup.signupSource ?? null,
    signupCampaign: signup.signupCampaign ?? null,
  };
}

/**
 * Finds the user of `email` or creates it on first sign-in; records the sign-in time either way. A
 * returning user's row changes in `last_login` only. An account whose deletion is due at the sign-in
 * is neither changed nor answered: it is no longer anyone's to sign in to (sign-in.service.ts erases
 * it first). A query, not a call: the sign-in statement (sessions.repository.ts) runs it as its first
 * step, with the session's inserts, prepared (`user` holds the markers of its arguments then).
 * Untagged, the signup columns are null as if omitted (they have no default), so that every sign-in
 * is the same SQL.
 */
export function upsertOnSignInQuery(db: Kysely<Database>, user: UpsertOnSignIn) {
  const { email, signedInAt, signupSource, signupCampaign } = user;
  return db
    .insertInto('users')
    .values({
      email,
      signupSource,
      signupCampaign,
      lastLogin: signedInAt,
      createdAt: signedInAt,
      updatedAt: signedInAt,
    })
    .onConflict((oc) =>
      oc
        .column('email')
        .doUpdateSet((eb) => ({ lastLogin: eb.ref('excluded.lastLogin') }))
        .where((eb) =>
          eb.or([
            eb('users.accountDeletionStatus', 'is distinct from', 'scheduled'),
            // No date (a row edited by hand) is never due, as for the sweep.
            eb('users.accountDeletionScheduledFor', 'is', null),
            eb('users.accountDeletionScheduledFor', '>', eb.ref('excluded.lastLogin')),
          ]),
        ),
    )
    .returningAll();
}

export function findUser(db: Kysely<Database>, id: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The account of `email` (normalized), if it has one. */
export function findUserByEmail(db: Kysely<Database>, email: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
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
