import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../../database.ts';

/** Where a request came from, as recorded on sessions and security events. */
export interface ClientInfo {
  ipAddress: string;
  userAgent: string | null;
}

const USER_AGENT_MAX = 512;

/** The client IP (from X-Forwarded-For only behind a trusted proxy) and a bounded User-Agent. */
export function clientInfo(request: FastifyRequest): ClientInfo {
  return {
    ipAddress: request.ip,
    userAgent: request.headers['user-agent']?.slice(0, USER_AGENT_MAX) ?? null,
  };
}

export type SecurityEventType = 'sign_in' | 'refresh_reuse' | 'revoke' | 'logout' | 'lockout' | 'rate_limit';

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

/** Appends one event to the security log (inside the caller's transaction when given one). */
export async function recordSecurityEvent(db: Kysely<Database>, event: SecurityEvent): Promise<void> {
  const { email } = event;
  await db
    .insertInto('securityEvents')
    .values({
      type: event.type,
      userId:
        event.userId ??
        (email === undefined ? null : (eb) => eb.selectFrom('users').select('id').where('email', '=', email)),
      sessionId: event.sessionId ?? null,
      ipAddress: event.client.ipAddress,
      userAgent: event.client.userAgent,
      details: JSON.stringify(event.details ?? {}),
      createdAt: event.at,
    })
    .execute();
}

/** The same, for events that follow an action already taken: a failed write is logged, not thrown. */
export async function recordSecurityEventSafely(
  db: Kysely<Database>,
  log: FastifyBaseLogger,
  event: SecurityEvent,
): Promise<void> {
  try {
    await recordSecurityEvent(db, event);
  } catch (err) {
    log.error({ err, event: event.type }, 'could not record a security event');
  }
}
