import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { clientInfo } from '../security-events/security-events.ts';
import { getMeSchema, patchMeSchema, registrationSchema } from './schemas.ts';
import { toUser } from './user.ts';
import type { Users } from './users.service.ts';

/** The caller's own account, under /api/v1/users. */
const usersRoutes: FastifyPluginAsyncTypebox<{ users: Users }> = async (app, { users }) => {
  app.addHook('onRequest', app.authenticate);

  app.get('/me', { schema: getMeSchema }, async (request) => toUser(await users.me(request.auth.sub)));

  app.patch(
    '/me',
    {
      schema: patchMeSchema,
      // The schema documents the rules; planProfileUpdate applies them, reporting every failing field
      // (a test keeps the two in agreement).
      validatorCompiler: () => (value) => ({ value }),
    },
    async (request) => {
      const client = { ...clientInfo(request), sessionId: request.auth.sid };
      return toUser(await users.update(request.auth.sub, request.body, client));
    },
  );

  app.get('/me/registration', { schema: registrationSchema }, (request) =>
    users.registration(request.auth.sub),
  );
};

export default usersRoutes;
