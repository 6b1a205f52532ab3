import { type Kysely, sql, type Transaction, type Updateable } from 'kysely';
import type { Database, UsersTable } from '../../database.ts';
import type { SecurityEventType } from '../security-events/event-types.ts';
import type { SessionEndReason } from '../sessions/sessions.repository.ts';
import type { UserRow } from '../users/user.ts';

/**
 * Schedules the deletion when none is (never requested, or cancelled before `cancelledBefore`);
 * otherwise changes nothing.
 */
export function scheduleDeletion(
  trx: Transaction<Database>,
  userId: string,
  { now, scheduledFor, cancelledBefore }: { now: Date; scheduledFor: Date; cancelledBefore: Date },
): Promise<UserRow | undefined> {
  return trx
    .updateTable('users')
    .set({
      accountDeletionStatus: 'scheduled',
      accountDeletionRequestedAt: now,
      accountDeletionScheduledFor: scheduledFor,
      accountDeletionCancelledAt: null,
      updatedAt: now,
    })
    .where('id', '=', userId)
    .where((eb) =>
      eb.or([
        eb('accountDeletionStatus', 'is', null),
        eb.and([
          eb('accountDeletionStatus', '=', 'cancelled'),
          eb('accountDeletionCancelledAt', '<=', cancelledBefore),
        ]),
      ]),
    )
    .returningAll()
    .executeTakeFirst();
}

/** Cancels a scheduled deletion that is not due yet; otherwise changes nothing. */
export function cancelDeletion(
  trx: Transaction<Database>,
  userId: string,
  now: Date,
): Promise<UserRow | undefined> {
  return trx
    .updateTable('users')
    .set({ accountDeletionStatus: 'cancelled', accountDeletionCancelledAt: now, updatedAt: now })
    .where('id', '=', userId)
    .where('accountDeletionStatus', '=', 'scheduled')
    .where('accountDeletionScheduledFor', '>', now)
    .returningAll()
    .executeTakeFirst();
}

/** Where the account's deletion stands; undefined when there is no such account. */
export function findDeletion(db: Kysely<Database>, userId: string) {
  return db
    .selectFrom('users')
    .select(['accountDeletionStatus', 'accountDeletionScheduledFor', 'accountDeletionCancelledAt'])
    .where('id', '=', userId)
    .executeTakeFirst();
}

/**
 * Up to `limit` accounts whose deletion is due, oldest first, locked until the transaction ends. Rows
 * another process has locked are skipped, so concurrent sweeps share the work instead of repeating it.
 * With `email`, only the account of that address, whose lock is waited for instead: a sign-in to it
 * finds it erased once this transaction commits, by this one or by the sweep that held it.
 */
export async function lockDueDeletions(
  trx: Transaction<Database>,
  now: Date,
  limit: number,
  email?: string,
): Promise<string[]> {
  const due = trx
    .selectFrom('users')
    .select('id')
    .where('accountDeletionStatus', '=', 'scheduled')
    .where('accountDeletionScheduledFor', '<=', now)
    .orderBy('accountDeletionScheduledFor')
    .orderBy('id')
    .limit(limit)
    .forUpdate();
  const rows = await (email === undefined ? due.skipLocked() : due.where('email', '=', email)).execute();
  return rows.map((row) => row.id);
}

/**
 * The columns a tombstone keeps: its id and times, the deletion's own, what `eraseAccounts` sets
 * itself, and the product's counts and prices, which say nothing of the person.
 */
type Kept =
  | 'id'
  | 'email'
  | 'createdAt'
  | 'updatedAt'
  | 'accountDeletionStatus'
  | 'accountDeletionRequestedAt'
  | 'accountDeletionScheduledFor'
  | 'accountDeletionCancelledAt'
  | 'accountDeletionFinalizedAt'
  | 'roles'
  | 'creditBalance'
  | 'followersCount'
  | 'followingCount'
  | 'minutePriceInLiveStream';

/**
 * Every other column back to what a new account has: nothing of the person is left. A column added
 * to `users` (and to database.generated.ts, `pnpm db:types`) fails the typecheck here until it is
 * erased too, or kept above.
 */
const ERASED_PROFILE: {
  [Column in Exclude<keyof UsersTable, Kept>]-?: Exclude<Updateable<UsersTable>[Column], undefined>;
} = {
  name: null,
  surname: null,
  username: null,
  countryCode: null,
  phoneNumber: null,
  signupSource: null,
  signupCampaign: null,
  profilePhoto: null,
  availabilityStatus: null,
  birthDate: null,
  gender: null,
  interests: [],
  expertise: null,
  bio: null,
  instagram: null,
  x: null,
  tiktok: null,
  snapchat: null,
  facebook: null,
  timezone: null,
  privacyPolicyAccepted: false,
  privacyPolicyVersion: null,
  termsOfUseAccepted: false,
  termsOfUseVersion: null,
  consentFormAccepted: false,
  consentFormVersion: null,
  lastUsernameChangeDate: null,
  lastLogin: null,
  isRegistrationComplete: false,
};

/**
 * Erases the accounts and marks them finalized. The rows stay as tombstones so an `_id` is never
 * reused. The address becomes `DELETED-<id>@tombstone.invalid`: `.invalid` never receives mail
 * (RFC 2606), the id keeps it unique, and the upper case keeps it out of reach of every sign-in,
 * since every address the gateway stores or looks up is lower-cased first.
 */
export async function eraseAccounts(trx: Transaction<Database>, userIds: string[], now: Date): Promise<void> {
  await trx
    .updateTable('users')
    .set({
      ...ERASED_PROFILE,
      email: sql<string>`'DELETED-' || ${sql.ref('id')} || '@tombstone.invalid'`,
      accountDeletionStatus: 'finalized',
      accountDeletionFinalizedAt: now,
      updatedAt: now,
    })
    .where('id', 'in', userIds)
    .execute();
}

/**
 * Ends the accounts' open sessions, forgets where every one of their sessions came from and deletes
 * their refresh tokens. Returns the ids of all their sessions, whose Redis keys must go.
 */
export async function endSessionsOf(
  trx: Transaction<Database>,
  userIds: string[],
  now: Date,
): Promise<{ ended: number; sessionIds: string[] }> {
  const endReason: SessionEndReason = 'account_deleted';
  const theirSessions = trx.selectFrom('sessions').select('id').where('userId', 'in', userIds);
  // Their refresh tokens' rows first, then their sessions', the order a rotation locks them in: in
  // the other order, a refresh rotating one of these tokens meanwhile and this sweep would each wait
  // for the other (a deadlock, which Postgres ends by failing one of them).
  await trx
    .selectFrom('refreshTokens')
    .select('tokenHash')
    .where('sessionId', 'in', theirSessions)
    .forUpdate()
    .execute();
  const ended = await trx
    .updateTable('sessions')
    .set({ endedAt: now, endReason })
    .where('userId', 'in', userIds)
    .where('endedAt', 'is', null)
    .executeTakeFirst();
  const sessions = await trx
    .updateTable('sessions')
    .set({ ipAddress: null, userAgent: null })
    .where('userId', 'in', userIds)
    .returning('id')
    .execute();
  // Also the successors of rotations that committed while this waited for the lock above.
  await trx.deleteFrom('refreshTokens').where('sessionId', 'in', theirSessions).execute();
  return { ended: Number(ended.numUpdatedRows), sessionIds: sessions.map((session) => session.id) };
}

/** Keeps the accounts' security events (what happened, when) without where from. */
export async function anonymizeSecurityEvents(trx: Transaction<Database>, userIds: string[]): Promise<void> {
  await trx
    .updateTable('securityEvents')
    .set({ ipAddress: null, userAgent: null })
    .where('userId', 'in', userIds)
    .execute();
}

/** The last event of each account: done by the service itself, so from nowhere. */
export async function recordFinalized(
  trx: Transaction<Database>,
  userIds: string[],
  now: Date,
): Promise<void> {
  const type: SecurityEventType = 'deletion_finalized';
  await trx
    .insertInto('securityEvents')
    .values(
      userIds.map((userId) => ({
        type,
        userId,
        sessionId: null,
        ipAddress: null,
        userAgent: null,
        details: '{}',
        createdAt: now,
      })),
    )
    .execute();
}
