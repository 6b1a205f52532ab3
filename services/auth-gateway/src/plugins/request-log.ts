import fp from 'fastify-plugin';

/**
 * One log line per request at `info`, when it is answered: method, path, client address, status and
 * time (Fastify's own logging writes two). At `debug` the arrival is logged as well.
 */
export default fp(
  async function requestLog(app) {
    app.addHook('onRequest', async (request) => {
      request.log.debug({ req: request }, 'incoming request');
    });
    app.addHook('onResponse', async (request, reply) => {
      request.log.info(
        { req: request, res: reply, responseTime: Math.round(reply.elapsedTime * 10) / 10 },
        'request completed',
      );
    });
  },
  { name: 'request-log' },
);
