import { type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { AppError, failure, statusMessage } from '@tessera/contracts';
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hooklessSecurityHeaders } from './http-security.ts';

/** Details for the Fastify errors a client can cause; anything else says only its status message. */
const FASTIFY_ERROR_DETAILS: Record<string, string> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'Body is not valid JSON',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'Content-Type must be application/json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'Request body is too large',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'Content-Length does not match the body',
};

// Postgres connection-class and shutdown errors, the socket errors of any client, and a query
// racing the gateway's own shutdown (pool already destroyed).
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '53300',
]);
const UNAVAILABLE_MESSAGES =
  /enableOfflineQueue|Connection is closed|Connection terminated|timeout exceeded when trying to connect|MaxRetriesPerRequest|driver has already been destroyed/;

function isDependencyUnavailable(error: FastifyError): boolean {
  return (
    (error.code !== undefined && (UNAVAILABLE_CODES.has(error.code) || error.code.startsWith('08'))) ||
    UNAVAILABLE_MESSAGES.test(error.message) ||
    error.name === 'MaxRetriesPerRequestError'
  );
}

function send(reply: FastifyReply, status: number, details: string[]) {
  return reply
    .status(status)
    .send(failure(status, [statusMessage(status), ...details], reply.server.clock.now()));
}

/** Fastify's `frameworkErrors`: a malformed URL or header fails before routing, still enveloped. */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const status = error.statusCode && error.statusCode < 500 ? error.statusCode : 400;
  // No hooks run for these, so the headers every other response gets are set here.
  reply.headers(hooklessSecurityHeaders(reply.server.config.APP_ENV));
  reply.header('x-request-id', request.id);
  return send(reply, status, []);
}

/** Node's `clientError`: a request too broken to parse (bad request line, huge headers) gets an envelope too. */
export function clientErrorHandler(error: ConnectionError, socket: Socket) {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  // The parser can fail on the body after a handler already answered the head (a URL Fastify
  // rejects at once, then a bad Transfer-Encoding): a second response would corrupt the stream.
  // Node's own clientError default checks the same thing.
  if ((socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage?.headersSent) {
    socket.end();
    return;
  }
  const status =
    error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  // No request, so no app clock: the socket is all there is.
  const body = JSON.stringify(failure(status, [statusMessage(status)], new Date()));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Turns every error and unknown route into the envelope; never shows internals on a 5xx. */
export default fp(
  async function errorHandler(app: FastifyInstance) {
    app.setNotFoundHandler((request, reply) =>
      send(reply, 404, [`No route ${request.method} ${request.url.split('?')[0]}`]),
    );

    app.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof AppError) {
        if (error.retryAfter !== undefined)
          reply.header('retry-after', String(Math.max(1, error.retryAfter)));
        return send(reply, error.statusCode, error.details);
      }
      if (error.validation) {
        const where = error.validationContext ?? 'body';
        return send(
          reply,
          400,
          error.validation.map(
            (v) => `${where}${v.instancePath.replaceAll('/', '.')} ${v.message ?? 'is invalid'}`,
          ),
        );
      }
      const status = error.statusCode ?? 500;
      if (status >= 400 && status < 500) {
        const detail = error.code ? FASTIFY_ERROR_DETAILS[error.code] : undefined;
        return send(reply, status, detail ? [detail] : []);
      }
      if (isDependencyUnavailable(error)) {
        request.log.warn({ err: error }, 'dependency unavailable');
        reply.header('retry-after', '5');
        return send(reply, 503, []);
      }
      request.log.error({ err: error }, 'unhandled error');
      return send(reply, 500, []);
    });
  },
  { name: 'error-handler', dependencies: ['config'] },
);
