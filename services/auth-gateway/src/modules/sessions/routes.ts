import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { success } from '@tessera/contracts';
import { clientInfo } from '../security-events/security-events.ts';
import {
  endSessionSchema,
  listSessionsSchema,
  logoutSchema,
  refreshTokenSchema,
  revokeTokenSchema,
} from './schemas.ts';
import type { SessionsService } from './sessions.service.ts';

/** Refresh, revoke, logout and the sessions list, under /api/v1/auth. */
const sessionsRoutes: FastifyPluginAsyncTypebox<{ sessions: SessionsService }> = async (
  app,
  { sessions },
) => {
  const { authenticate, clock } = app;

  app.post('/refresh-token', { schema: refreshTokenSchema }, async (request) =>
    success(await sessions.refresh(request.body.refreshToken, clientInfo(request)), clock.now()),
  );

  app.post('/revoke-token', { schema: revokeTokenSchema, onRequest: authenticate }, async (request) =>
    success(
      await sessions.revoke(request.auth.sub, request.body.refreshToken, clientInfo(request)),
      clock.now(),
    ),
  );

  app.post('/logout', { schema: logoutSchema, onRequest: authenticate }, async (request) =>
    success(await sessions.logout(request.auth.sub, clientInfo(request)), clock.now()),
  );

  app.get('/sessions', { schema: listSessionsSchema, onRequest: authenticate }, async (request) =>
    success(await sessions.list(request.auth.sub, request.auth.sid, request.query), clock.now()),
  );

  app.delete('/sessions/:id', { schema: endSessionSchema, onRequest: authenticate }, async (request) =>
    success(await sessions.end(request.auth.sub, request.params.id, clientInfo(request)), clock.now()),
  );
};

export default sessionsRoutes;
