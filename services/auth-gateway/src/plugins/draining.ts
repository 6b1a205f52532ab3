import fp from 'fastify-plugin';
import { GatewayError } from '../errors.ts';

/**
 * While the gateway drains (after SIGTERM), a request that still arrives on an open connection is
 * answered with the 503 envelope, `Retry-After` and `Connection: close`, so the client retries on
 * another instance; the requests already in flight finish.
 */
export default fp(
  async function draining(app) {
    let closing = false;
    app.addHook('preClose', async () => {
      closing = true;
    });
    app.addHook('onRequest', (_request, reply, done) => {
      if (!closing) return done();
      reply.header('connection', 'close');
      done(new GatewayError('SHUTTING_DOWN'));
    });
  },
  { name: 'draining', dependencies: ['error-handler'] },
);
