import { isUtf8 } from 'node:buffer';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../errors.ts';

const PROTOTYPE_KEY = 'body holds a `__proto__` or `constructor.prototype` key, which no field has';
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;

/**
 * JSON is the only body type: `text/plain` and everything else is a 415, and so is JSON in another
 * charset than UTF-8 or compressed (a Content-Encoding, a Transfer-Encoding other than chunked).
 * Bytes that are not UTF-8 are a 400, not text with U+FFFD in their place. No body, or an empty one,
 * reads as no body whatever the Content-Type (so `POST /logout` with only a Content-Type header
 * works), and one with a `__proto__` or `constructor.prototype` key is a 400: no field has that name,
 * and a body that names an object's prototype is an attack, not a field to drop quietly.
 */
export default fp(
  async function jsonBody(app: FastifyInstance) {
    const parse = app.getDefaultJsonParser('error', 'error');
    const parseAny = app.getDefaultJsonParser('ignore', 'ignore');
    app.removeAllContentTypeParsers();
    // No body is no body, whatever Content-Type says: axios in Node gives a POST without data
    // `application/x-www-form-urlencoded`, and so do the clients generated on it (logout, deletion);
    // `curl -X POST -H 'Content-Type: …'` sends neither length nor coding, which is no body (RFC 9112).
    app.addHook('onRequest', (request, _reply, done) => {
      const { headers } = request;
      const length = headers['content-length'];
      if ((length === undefined || length === '0') && headers['transfer-encoding'] === undefined)
        delete headers['content-type'];
      done();
    });
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      const bytes = body as Buffer;
      if (bytes.length === 0) return done(null, undefined);
      // Nothing is decompressed: a gzip body would read as bytes that are not UTF-8. Of the transfer
      // codings Node undoes only chunked, and leaves any other (gzip, chunked) as sent.
      const encoding = request.headers['content-encoding']?.trim().toLowerCase();
      const transfer = request.headers['transfer-encoding']?.split(',');
      if (
        (encoding && encoding !== 'identity') ||
        transfer?.some((coding) => coding.trim().toLowerCase() !== 'chunked')
      )
        return done(new GatewayError('UNSUPPORTED_ENCODING'));
      // ASCII is UTF-8 too.
      const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1];
      if (charset !== undefined && !/^(utf-?8|us-ascii)$/i.test(charset))
        return done(new GatewayError('UNSUPPORTED_CHARSET'));
      if (!isUtf8(bytes)) return done(new GatewayError('INVALID_JSON', ['body is not UTF-8']));
      const text = bytes.toString('utf8');
      return parse(request, text, (error, value) => {
        if (!error) return done(null, value);
        // JSON all the same, when it parses without the check: then it was a prototype key.
        return parseAny(request, text, (invalid) =>
          done(invalid ? error : new GatewayError('VALIDATION_FAILED', [PROTOTYPE_KEY])),
        );
      });
    });
  },
  { name: 'json-body' },
);
