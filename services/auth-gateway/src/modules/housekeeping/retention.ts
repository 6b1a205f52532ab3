import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../database.ts';
import * as repository from './retention.repository.ts';

export interface RetentionOptions {
  db: Kysely<Database>;
  clock: Clock;
  /** SESSION_RETENTION: seconds an ended or expired session (and an expired refresh token) is kept. */
  sessionRetention: number;
  /** SECURITY_EVENT_RETENTION: seconds a security event is kept. */
  securityEventRetention: number;
}

/**
 * Storage that does not grow forever: the batches of one run of the retention sweep. Each deletes a
 * batch of each kind of expired row that has not come back short yet in this run, and returns the
 * most rows one of them deleted (a full batch means more may be left): a backlog of one kind does
 * not query the others again and again for nothing.
 */
export function retentionBatches({ db, clock, sessionRetention, securityEventRetention }: RetentionOptions) {
  const ago = (seconds: number) => new Date(clock.now().getTime() - seconds * 1000);
  let left = [
    (limit: number) => repository.deleteOldSessions(db, ago(sessionRetention), limit),
    (limit: number) => repository.deleteOldRefreshTokens(db, ago(sessionRetention), limit),
    (limit: number) => repository.deleteOldSecurityEvents(db, ago(securityEventRetention), limit),
  ];
  return async (limit: number): Promise<number> => {
    const counts: number[] = [];
    for (const kind of left) counts.push(await kind(limit));
    left = left.filter((_, i) => (counts[i] ?? 0) >= limit);
    return Math.max(0, ...counts);
  };
}
