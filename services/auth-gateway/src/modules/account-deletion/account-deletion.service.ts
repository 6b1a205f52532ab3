import {
  DELETION_CANCELLED_JOB,
  DELETION_SCHEDULED_JOB,
  deletionCancelledJobId,
  deletionScheduledJobId,
  type EmailJobName,
  type EmailJobs,
  NOTICE_RETRY_WINDOW_MS,
} from '@tessera/contracts';
import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import { GatewayError } from '../../errors.ts';
import type { EmailQueue } from '../email/email.queue.ts';
import type { ClientInfo, SecurityLog } from '../security-events/security-events.ts';
import type { ActiveSessionStore } from '../sessions/active-sessions.store.ts';
import { sessionsEnded } from '../sessions/metrics.ts';
import type { UserRow } from '../users/user.ts';
import * as repository from './account-deletion.repository.ts';
import { accountDeletions } from './metrics.ts';

export interface AccountDeletionOptions {
  db: Kysely<Database>;
  activeSessions: ActiveSessionStore;
  emails: EmailQueue;
  securityLog: SecurityLog;
  clock: Clock;
  log: FastifyBaseLogger;
  /** Seconds from a request to the erasure (ACCOUNT_DELETION_GRACE). */
  grace: number;
  /** Seconds after a cancellation before the next request (ACCOUNT_DELETION_REQUEST_COOLDOWN). */
  requestCooldown: number;
}

/** Where the caller is, and which session asks. */
export type Caller = ClientInfo & { sessionId: string };

export type AccountDeletion = ReturnType<typeof createAccountDeletion>;

/**
 * Account deletion with a grace period (API.md §8.11): the user schedules it and may cancel it until
 * it is due; then `finalizeDue` (run by the sweep) erases the account and ends every session of it.
 */
export function createAccountDeletion({
  db,
  activeSessions,
  emails,
  securityLog,
  clock,
  log,
  grace,
  requestCooldown,
}: AccountDeletionOptions) {
  /**
   * Why a transition did not apply: the account is gone (as if signed out), in the wrong state, or
   * (for a request) cancelled less than `requestCooldown` ago.
   */
  async function refusal(
    trx: Kysely<Database>,
    userId: string,
    now: Date,
    wrongState: 'scheduled' | 'not scheduled',
  ) {
    const deletion = await repository.findDeletion(trx, userId);
    if (!deletion || deletion.accountDeletionStatus === 'finalized') return new GatewayError('SESSION_ENDED');
    const cancelledAt = deletion.accountDeletionCancelledAt;
    if (wrongState === 'scheduled' && deletion.accountDeletionStatus === 'cancelled' && cancelledAt) {
      const retryAfter = Math.ceil((cancelledAt.getTime() + requestCooldown * 1000 - now.getTime()) / 1000);
      return new GatewayError('DELETION_TOO_SOON', [`Try again in ${retryAfter} seconds`], retryAfter);
    }
    if (wrongState === 'scheduled') return new GatewayError('DELETION_ALREADY_SCHEDULED');
    const due = deletion.accountDeletionScheduledFor;
    if (deletion.accountDeletionStatus === 'scheduled' && due && due <= now)
      return new GatewayError('DELETION_DUE');
    return new GatewayError('DELETION_NOT_SCHEDULED');
  }

  /**
   * After the transition has committed: its notice, the newest of the account (an older one still
   * queued is not sent). A mail that cannot be queued leaves the transition standing, logged.
   */
  async function notify<N extends EmailJobName>(name: N, data: EmailJobs[N], jobId: string, userId: string) {
    try {
      await emails.add(name, data, jobId, NOTICE_RETRY_WINDOW_MS);
    } catch (err) {
      log.error({ err, userId, jobId }, 'could not queue the account deletion email');
    }
  }

  return {
    /** `null`/`cancelled` → `scheduled`, due `ACCOUNT_DELETION_GRACE` seconds from now. */
    async request(userId: string, { sessionId, ...client }: Caller): Promise<UserRow> {
      const now = clock.now();
      const scheduledFor = new Date(now.getTime() + grace * 1000);
      const cancelledBefore = new Date(now.getTime() - requestCooldown * 1000);
      const user = await db.transaction().execute(async (trx) => {
        const row = await repository.scheduleDeletion(trx, userId, { now, scheduledFor, cancelledBefore });
        if (!row) throw await refusal(trx, userId, now, 'scheduled');
        const details = { scheduledFor: scheduledFor.toISOString() };
        await securityLog.record(
          { type: 'deletion_requested', userId, sessionId, client, details, at: now },
          trx,
        );
        return row;
      });
      accountDeletions.add(1, { transition: 'requested' });
      log.info({ userId, scheduledFor }, 'account deletion scheduled');
      await notify(
        DELETION_SCHEDULED_JOB,
        { to: user.email, scheduledFor: scheduledFor.toISOString() },
        deletionScheduledJobId(userId, now),
        userId,
      );
      return user;
    },

    /** `scheduled` → `cancelled`, while the deletion is not due yet. */
    async cancel(userId: string, { sessionId, ...client }: Caller): Promise<UserRow> {
      const now = clock.now();
      const user = await db.transaction().execute(async (trx) => {
        const row = await repository.cancelDeletion(trx, userId, now);
        if (!row) throw await refusal(trx, userId, now, 'not scheduled');
        await securityLog.record({ type: 'deletion_cancelled', userId, sessionId, client, at: now }, trx);
        return row;
      });
      accountDeletions.add(1, { transition: 'cancelled' });
      log.info({ userId }, 'account deletion cancelled');
      await notify(
        DELETION_CANCELLED_JOB,
        { to: user.email, cancelledAt: now.toISOString() },
        deletionCancelledJobId(userId, now),
        userId,
      );
      return user;
    },

    /**
     * `scheduled` → `finalized` for up to `limit` due accounts (the sweep), or for the account of
     * `email` if its deletion is due (a sign-in to it), in one transaction; returns their ids. Safe to
     * run in several processes at once: each account is finalized by exactly one of them.
     */
    async finalizeDue(limit: number, email?: string): Promise<string[]> {
      const now = clock.now();
      const { userIds, ended, sessionIds } = await db.transaction().execute(async (trx) => {
        // Erasing accounts with years of sessions and events may take longer than a request may: the
        // sweep has 10 minutes. A sign-in's erasure is a request's, bounded as every other (503, and
        // one too long is left to the sweep).
        if (email === undefined) await sql`set local statement_timeout = '10min'`.execute(trx);
        const ids = await repository.lockDueDeletions(trx, now, limit, email);
        if (ids.length === 0) return { userIds: ids, ended: 0, sessionIds: [] };
        await repository.eraseAccounts(trx, ids, now);
        const sessions = await repository.endSessionsOf(trx, ids, now);
        await repository.anonymizeSecurityEvents(trx, ids);
        await repository.recordFinalized(trx, ids, now);
        // Before the commit: when Redis fails, nothing is finalized and the next run tries again. A
        // refresh waiting on a session row finds the session ended once this commits.
        // Every session's key, not only those ended now: a delete that failed before is repaired.
        await activeSessions.remove(sessions.sessionIds);
        return { userIds: ids, ended: sessions.ended, sessionIds: sessions.sessionIds };
      });
      if (userIds.length === 0) return userIds;
      accountDeletions.add(userIds.length, { transition: 'finalized' });
      sessionsEnded.add(ended, { reason: 'account_deleted' });
      log.info({ userIds }, 'accounts deleted');
      // And after the commit, as every revocation does: a refresh that rotated just before the sweep
      // and found the key gone set it again, then read the session before this commit (still open).
      // The accounts are finalized whatever this answers; if Redis fails here, such a key lets an
      // access token work until it expires (a refresh of the ended session deletes it).
      await activeSessions.remove(sessionIds).catch((err: unknown) => {
        log.warn({ err, userIds }, 'could not delete the session keys of deleted accounts again');
      });
      return userIds;
    },
  };
}
