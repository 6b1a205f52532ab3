import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { paginationMeta } from '@tessera/contracts';
import { listSecurityEventsSchema, toSecurityEvent } from './schemas.ts';
import type { SecurityLog } from './security-events.ts';

/** `GET /api/v1/users/me/security-events`: what happened to the caller's account, paginated. */
const securityEventsRoutes: FastifyPluginAsyncTypebox<{ securityLog: SecurityLog }> = async (
  app,
  { securityLog },
) => {
  app.get(
    '/me/security-events',
    { schema: listSecurityEventsSchema, onRequest: app.authenticate },
    async (request) => {
      const { events, totalItems } = await securityLog.list(request.auth.sub, request.query);
      return { list: events.map(toSecurityEvent), pagination: paginationMeta(request.query, totalItems) };
    },
  );
};

export default securityEventsRoutes;
