import type { Socket } from 'node:net';
import fp from 'fastify-plugin';
import { GatewayError } from '../errors.ts';
import type { ServerSocket } from './error-handler.ts';

/**
 * While the gateway drains (after SIGTERM), a request that still arrives on an open connection is
 * answered with the 503 envelope, `Retry-After` and `Connection: close`, so the client retries on
 * another instance; the requests already in flight finish. A keep-alive connection is closed as soon
 * as its last answer has gone. Node stops timing requests once its server closes: the drain goes on
 * doing it, from its own start, so a client that does not finish sending its request still gets its
 * 408, `REQUEST_TIMEOUT` after the SIGTERM at the latest, rather than hold the drain to its deadline.
 */
export default fp<{ requestTimeout: number }>(
  async function draining(app, { requestTimeout }) {
    const { server } = app;
    let closing = false;
    let sweeps: NodeJS.Timeout | undefined;

    app.addHook('preClose', async () => {
      closing = true;
      // Past this, no request on a connection that began before the drain can still arrive in time.
      const timeoutAt = performance.now() + requestTimeout;
      const timedOut = new Map<Socket, number>();
      sweeps = setInterval(() => {
        server.closeIdleConnections();
        const now = performance.now();
        if (now < timeoutAt) return;
        for (const socket of app.connections as ReadonlySet<ServerSocket>) {
          const answer = socket._httpMessage;
          if (answer?.req.complete && !answer.writableFinished) continue;
          const answeredAt = timedOut.get(socket);
          if (answeredAt === undefined) {
            timedOut.set(socket, now);
            server.emit('clientError', REQUEST_TIMEOUT(), socket);
          } else if (now - answeredAt > 1000) socket.destroy();
        }
      }, 100);
    });
    app.addHook('onClose', async () => clearInterval(sweeps));

    app.addHook('onRequest', (_request, reply, done) => {
      if (!closing) return done();
      reply.header('connection', 'close');
      done(new GatewayError('SHUTTING_DOWN'));
    });
  },
  { name: 'draining', dependencies: ['error-handler', 'connections'] },
);

/** The error of Node's own request timeout, which the clientError handler answers with the 408 envelope. */
const REQUEST_TIMEOUT = () =>
  Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
