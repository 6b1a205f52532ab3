import { errorResponses, Paginated, PaginationQuery } from '@tessera/contracts';
import { type Static, Type } from 'typebox';
import { SecurityEventTypeSchema } from './event-types.ts';
import type { listEvents } from './security-events.repository.ts';

const Nullable = Type.Union([Type.String(), Type.Null()]);

const SecurityEvent = Type.Object({
  _id: Type.String(),
  type: SecurityEventTypeSchema,
  createdAt: Type.String({ format: 'date-time' }),
  ipAddress: Nullable,
  userAgent: Nullable,
  sessionId: Type.Union([Type.String(), Type.Null()], { description: 'null when not tied to a session' }),
});

export const listSecurityEventsSchema = {
  summary: "The caller's own security events, newest first",
  tags: ['users'],
  security: [{ bearerAuth: [] }],
  querystring: PaginationQuery,
  response: { 200: Paginated(SecurityEvent), ...errorResponses(400, 401, 503) },
};

export function toSecurityEvent(
  row: Awaited<ReturnType<typeof listEvents>>[number],
): Static<typeof SecurityEvent> {
  return {
    _id: row.id,
    type: row.type as Static<typeof SecurityEventTypeSchema>,
    createdAt: row.createdAt.toISOString(),
    ipAddress: row.ipAddress,
    userAgent: row.userAgent,
    sessionId: row.sessionId,
  };
}
