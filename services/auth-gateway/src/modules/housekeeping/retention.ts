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
 * Storage that does not grow forever: one batch of each kind of expired row per call; returns how
 * many rows it deleted (a full batch means more may be left).
 */
export function retentionBatch({ db, clock, sessionRetention, securityEventRetention }: RetentionOptions) {
  const ago = (seconds: number) => new Date(clock.now().getTime() - seconds * 1000);
  return async (limit: number): Promise<number> => {
    const sessions = await repository.deleteOldSessions(db, ago(sessionRetention), limit);
    const tokens = await repository.deleteOldRefreshTokens(db, ago(sessionRetention), limit);
    const events = await repository.deleteOldSecurityEvents(db, ago(securityEventRetention), limit);
    return Math.max(sessions, tokens, events);
  };
}
