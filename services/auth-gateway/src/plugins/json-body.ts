import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * JSON is the only body type: `text/plain` and everything else is a 415. An empty JSON body reads
 * as no body (so `POST /logout` with only a Content-Type header works), and `__proto__` /
 * `constructor.prototype` keys are dropped rather than trusted.
 */
export default fp(
  async function jsonBody(app: FastifyInstance) {
    const parse = app.getDefaultJsonParser('remove', 'remove');
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
      if (body === '') return done(null, undefined);
      return parse(request, body as string, done);
    });
  },
  { name: 'json-body' },
);
