import type { FastifyBaseLogger } from 'fastify';
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
  log: FastifyBaseLogger;
}

// Shorter than an audit usually asks for: said at start, since the setting is in seconds (`365` is six
// minutes, not a year).
const AUDIT_RETENTION = 30 * 24 * 3600;

/** At start: a warning when security events are kept for less than 30 days. */
export function warnIfShortRetention({
  securityEventRetention,
  log,
}: Pick<RetentionOptions, 'securityEventRetention' | 'log'>) {
  if (securityEventRetention < AUDIT_RETENTION)
    log.warn(
      { securityEventRetention },
      `security events are deleted ${securityEventRetention} seconds after they happen (SECURITY_EVENT_RETENTION is in seconds)`,
    );
}

/**
 * Storage that does not grow forever: the batches of one run of the retention sweep. Each deletes a
 * batch of each kind of expired row that has not come back short yet in this run, and returns the
 * most rows one of them deleted (a full batch means more may be left): a backlog of one kind does
 * not query the others again and again for nothing.
 */
export function retentionBatches({
  db,
  clock,
  sessionRetention,
  securityEventRetention,
  log,
}: RetentionOptions) {
  const ago = (seconds: number) => new Date(clock.now().getTime() - seconds * 1000);
  type Kind = (limit: number) => Promise<number>;
  const sessions: Kind = (limit) => repository.deleteOldSessions(db, ago(sessionRetention), limit);
  const tokens: Kind = (limit) => repository.deleteOldRefreshTokens(db, ago(sessionRetention), limit);
  const events: Kind = (limit) => repository.deleteOldSecurityEvents(db, ago(securityEventRetention), limit);
  let left = [sessions, tokens, events];
  // Security events deleted in this run, said when it ends (stopped or failed too): an audit trail of
  // the deletions of the audit trail.
  let eventsDeleted = 0;
  const end = () => {
    if (eventsDeleted > 0)
      log.info(
        { deleted: eventsDeleted, before: ago(securityEventRetention).toISOString() },
        'security events past SECURITY_EVENT_RETENTION deleted',
      );
  };
  const batch = async (limit: number): Promise<number> => {
    const counts = new Map<Kind, number>();
    for (const kind of left) {
      // Rotated tokens wait for the backlog of expired sessions: until it is gone, the index of the
      // tokens' expiry also holds those sessions' current tokens, which every batch would read past.
      const waits = kind === tokens && (counts.get(sessions) ?? 0) >= limit;
      counts.set(kind, waits ? limit : await kind(limit));
    }
    eventsDeleted += counts.get(events) ?? 0;
    left = left.filter((kind) => (counts.get(kind) ?? 0) >= limit);
    return Math.max(0, ...counts.values());
  };
  return Object.assign(batch, { end });
}
