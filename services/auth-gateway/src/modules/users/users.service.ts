import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import { GatewayError } from '../../errors.ts';
import type { ClientInfo, SecurityLog } from '../security-events/security-events.ts';
import { type CurrentPolicies, isJsonObject, planProfileUpdate, registrationStatus } from './profile.ts';
import type { UserRow } from './user.ts';
import * as repository from './users.repository.ts';

export interface UsersOptions {
  db: Kysely<Database>;
  securityLog: SecurityLog;
  clock: Clock;
  policies: CurrentPolicies;
  minAge: number;
  usernameChangeCooldown: number;
}

export type Users = ReturnType<typeof createUsers>;

// Postgres's unique violation on the case-insensitive username index (by driver error code).
const isUsernameTaken = (error: unknown) =>
  (error as { code?: string; constraint?: string }).code === '23505' &&
  (error as { constraint?: string }).constraint === 'users_username_lower_key';

/** The caller's own account: the profile, its rules (API.md §8.9) and what registration still needs. */
export function createUsers({
  db,
  securityLog,
  clock,
  policies,
  minAge,
  usernameChangeCooldown,
}: UsersOptions) {
  /**
   * The account, or the answer to a token that outlived it (its row gone, or erased by the deletion
   * sweep while the request was on its way): nothing to show or change, as if the session had ended.
   */
  function live(user: UserRow | undefined): UserRow {
    if (!user || user.accountDeletionStatus === 'finalized') throw new GatewayError('SESSION_ENDED');
    return user;
  }

  async function me(userId: string): Promise<UserRow> {
    return live(await repository.findUser(db, userId));
  }

  return {
    me,

    /** Applies a partial update; every accepted policy and username change is a security event. */
    async update(
      userId: string,
      body: unknown,
      client: ClientInfo & { sessionId: string },
    ): Promise<UserRow> {
      // The body's shape, as every other route's schema checks it; the profile's rules check its fields.
      if (!isJsonObject(body)) throw new GatewayError('VALIDATION_FAILED', ['body must be a JSON object']);
      const now = clock.now();
      try {
        return await db.transaction().execute(async (trx) => {
          // Locked: a sweep that erased the account meanwhile is seen here, not overwritten.
          const current = live(await repository.lockUser(trx, userId));
          const plan = planProfileUpdate(body, {
            current,
            now,
            policies,
            minAge,
            usernameChangeCooldownSeconds: usernameChangeCooldown,
          });
          if (!plan.ok)
            throw new GatewayError(
              plan.status === 409 ? 'USERNAME_COOLDOWN' : 'PROFILE_INVALID',
              plan.details,
            );
          if (Object.keys(plan.changes).length === 0) return current;
          const updated = await repository.updateUser(trx, userId, { ...plan.changes, updatedAt: now });
          const { sessionId, ...where } = client;
          for (const event of plan.events)
            await securityLog.record({ ...event, userId, sessionId, client: where, at: now }, trx);
          return updated;
        });
      } catch (error) {
        if (isUsernameTaken(error)) throw new GatewayError('USERNAME_TAKEN');
        throw error;
      }
    },

    async registration(userId: string) {
      return registrationStatus(await me(userId), policies);
    },
  };
}
