import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { paginationMeta } from '@tessera/contracts';
import { clientInfo } from '../security-events/security-events.ts';
import {
  endSessionSchema,
  listSessionsSchema,
  logoutSchema,
  refreshTokenSchema,
  revokeTokenSchema,
  toRevoked,
  toSession,
} from './schemas.ts';
import type { Sessions } from './sessions.ts';

/** Refresh, revoke, logout, the sessions list and "sign out that device", under /api/v1/auth. */
const sessionsRoutes: FastifyPluginAsyncTypebox<{ sessions: Sessions }> = async (app, { sessions }) => {
  const { authenticate } = app;

  app.post('/refresh-token', { schema: refreshTokenSchema }, (request) =>
    sessions.refresh(request.body.refreshToken, clientInfo(request)),
  );

  app.post('/revoke-token', { schema: revokeTokenSchema, onRequest: authenticate }, async (request) =>
    toRevoked(await sessions.revoke(request.auth.sub, request.body.refreshToken, clientInfo(request))),
  );

  app.post('/logout', { schema: logoutSchema, onRequest: authenticate }, async (request) => ({
    revokedSessions: (
      await sessions.logout(request.auth.sub, { ...clientInfo(request), sessionId: request.auth.sid })
    ).ended,
  }));

  app.get('/sessions', { schema: listSessionsSchema, onRequest: authenticate }, async (request) => {
    const { sessions: page, totalItems } = await sessions.list(request.auth.sub, request.query);
    return {
      list: page.map((row) => toSession(row, request.auth.sid)),
      pagination: paginationMeta(request.query, totalItems),
    };
  });

  app.delete('/sessions/:id', { schema: endSessionSchema, onRequest: authenticate }, async (request) =>
    toRevoked(await sessions.end(request.auth.sub, request.params.id, clientInfo(request))),
  );
};

export default sessionsRoutes;
