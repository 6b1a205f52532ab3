import { isUtf8 } from 'node:buffer';
import { type PaginationQuery, pageOffset } from '@tessera/contracts';
import { meter } from '@tessera/telemetry';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../../database.ts';
import type { SecurityEventType } from './event-types.ts';
import * as repository from './security-events.repository.ts';

const eventsLost = meter.createCounter('tessera.security_events.lost', {
  description: 'Security events not recorded while the action they tell of stood (the write failed)',
});
eventsLost.add(0);

/** A security event whose action stood but whose write failed: logged, and counted for an alert. */
export function eventLost(log: FastifyBaseLogger, err: unknown, type: SecurityEventType): void {
  eventsLost.add(1);
  log.error({ err, event: type }, 'could not record a security event');
}

/** Where a request came from, as recorded on sessions and security events. */
export interface ClientInfo {
  ipAddress: string;
  userAgent: string | null;
}

const USER_AGENT_MAX = 512;
// Invisible in a list of sessions or events (controls, direction marks, line separators), they could
// only make one User-Agent read as another.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * The client IP (from X-Forwarded-For only behind a trusted proxy) and the User-Agent, read as UTF-8
 * where its bytes are (Node reads a header's bytes one character each), without invisible
 * characters and bounded.
 */
export function clientInfo(request: FastifyRequest): ClientInfo {
  const header = request.headers['user-agent'];
  return {
    ipAddress: request.ip,
    userAgent: header === undefined ? null : asUtf8(header).replace(INVISIBLE, '').slice(0, USER_AGENT_MAX),
  };
}

function asUtf8(header: string): string {
  if (!/[\u0080-\u00ff]/.test(header)) return header;
  const bytes = Buffer.from(header, 'latin1');
  return isUtf8(bytes) ? bytes.toString('utf8') : header;
}

export interface SecurityEvent {
  type: SecurityEventType;
  /** The account concerned, when known. */
  userId?: string;
  /** Or the email whose account (if any) is concerned; only the account id is stored. */
  email?: string;
  sessionId?: string;
  client: ClientInfo;
  details?: Record<string, string | number>;
  at: Date;
}

export type SecurityLog = ReturnType<typeof createSecurityLog>;

/** The security log: who did what from where, never a code, a token or an email address. */
export function createSecurityLog(db: Kysely<Database>, log: FastifyBaseLogger) {
  /**
   * Appends one event (inside the caller's transaction when given one); a failure throws. Answers
   * the account it was recorded under (null: none).
   */
  async function record(event: SecurityEvent, trx: Kysely<Database> = db): Promise<string | null> {
    const { email } = event;
    return repository.insertSecurityEvent(trx, {
      type: event.type,
      ...(event.userId === undefined && email !== undefined ? { email } : { userId: event.userId ?? null }),
      sessionId: event.sessionId ?? null,
      ipAddress: event.client.ipAddress,
      userAgent: event.client.userAgent,
      details: JSON.stringify(event.details ?? {}),
      createdAt: event.at,
    });
  }

  return {
    record,

    /** One page of the user's own events, newest first, and how many there are. */
    list(userId: string, query: PaginationQuery) {
      return repository.listEvents(db, userId, { limit: query.limit, offset: pageOffset(query) });
    },

    /**
     * For events that follow an action already taken: the action stands, a failed write is logged.
     * Answers the account it was recorded under (null: none; undefined: not recorded).
     */
    async recordAfter(event: SecurityEvent): Promise<string | null | undefined> {
      try {
        return await record(event);
      } catch (err) {
        eventLost(log, err, event.type);
        return undefined;
      }
    },
  };
}
