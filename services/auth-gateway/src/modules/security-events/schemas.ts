import { errorResponses, named, Paginated, PaginationQuery } from '@tessera/contracts';
import { type Static, Type } from 'typebox';
import { SecurityEventTypeSchema } from './event-types.ts';
import type { listEvents } from './security-events.repository.ts';

const Nullable = Type.Union([Type.String(), Type.Null()]);

const SecurityEvent = named(
  'SecurityEvent',
  Type.Object({
    _id: Type.String(),
    type: SecurityEventTypeSchema,
    createdAt: Type.String({ format: 'date-time' }),
    ipAddress: Nullable,
    userAgent: Nullable,
    sessionId: Type.Union([Type.String(), Type.Null()], { description: 'null when not tied to a session' }),
  }),
  "Something that happened to the account's security, and the client it came from",
);

export const listSecurityEventsSchema = {
  operationId: 'listSecurityEvents',
  summary: "The caller's own security events, newest first",
  tags: ['users'],
  security: [{ bearerAuth: [] }],
  querystring: PaginationQuery,
  response: {
    200: named(
      'SecurityEventPage',
      Paginated(SecurityEvent, {
        description: "A page of the caller's security events",
        examples: [
          {
            list: [
              {
                _id: '7c3e9a1f-2b4d-4f6a-8e0c-1d3f5a7b9c2e',
                type: 'sign_in',
                createdAt: '2026-11-23T09:58:12.000Z',
                ipAddress: '203.0.113.7',
                userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 19_1 like Mac OS X) AppleWebKit/605.1.15',
                sessionId: '9e1c7b4a-3d2f-4a6e-8b1c-5f7d9e0a2b3c',
              },
            ],
            pagination: {
              currentPage: 1,
              totalPages: 4,
              totalItems: 31,
              itemsPerPage: 10,
              hasNextPage: true,
              hasPrevPage: false,
            },
          },
        ],
      }),
      "A page of the caller's security events",
    ),
    ...errorResponses(400, 401, 503),
  },
};

export function toSecurityEvent(
  row: Awaited<ReturnType<typeof listEvents>>['events'][number],
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
