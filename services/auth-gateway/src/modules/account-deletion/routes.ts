import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { clientInfo } from '../security-events/security-events.ts';
import { toUser } from '../users/user.ts';
import type { AccountDeletion, Caller } from './account-deletion.service.ts';
import { cancelDeletionSchema, requestDeletionSchema } from './schemas.ts';

const caller = (request: FastifyRequest): Caller => ({ ...clientInfo(request), sessionId: request.auth.sid });

/** `POST` and `DELETE /api/v1/users/me/deletion`: schedule and cancel the caller's account deletion. */
const accountDeletionRoutes: FastifyPluginAsyncTypebox<{ accountDeletion: AccountDeletion }> = async (
  app,
  { accountDeletion },
) => {
  app.post('/me/deletion', { schema: requestDeletionSchema, onRequest: app.authenticate }, async (request) =>
    toUser(await accountDeletion.request(request.auth.sub, caller(request))),
  );

  app.delete('/me/deletion', { schema: cancelDeletionSchema, onRequest: app.authenticate }, async (request) =>
    toUser(await accountDeletion.cancel(request.auth.sub, caller(request))),
  );
};

export default accountDeletionRoutes;
