import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { AppEnv } from '@tessera/config';
import { DependencyBusyError, DependencyUnavailableError, failure, statusMessage } from '@tessera/contracts';
import { meter } from '@tessera/telemetry';
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Clock } from '../clock.ts';
import { ERRORS, type ErrorCode, GatewayError } from '../errors.ts';
import { hooklessSecurityHeaders } from './http-security.ts';

const errorsAnswered = meter.createCounter('tessera.errors', {
  description:
    'Error responses by the stable code of the error catalog; a 503 of an outage or a full pool also by dependency (postgres, redis)',
});
/** The codes answered when a dependency is out of reach or full, counted by which one. */
const OF_DEPENDENCY: ReadonlySet<ErrorCode> = new Set(['DEPENDENCY_UNAVAILABLE', 'SERVER_BUSY']);
// Every series from the start, at 0: an alert's rate() then sees the first errors after a restart.
for (const code of Object.keys(ERRORS) as ErrorCode[])
  if (!OF_DEPENDENCY.has(code)) errorsAnswered.add(0, { code });
for (const dependency of ['postgres', 'redis'])
  errorsAnswered.add(0, { code: 'DEPENDENCY_UNAVAILABLE', dependency });
errorsAnswered.add(0, { code: 'SERVER_BUSY', dependency: 'postgres' });

/** The catalog entry of each Fastify error a client can cause. */
const FASTIFY_ERRORS: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'CONTENT_LENGTH_MISMATCH',
};

export interface ErrorHandlerOptions {
  appEnv: AppEnv;
  clock: Clock;
}

/**
 * An outage's cause in two short fields: its message (those of a connection attempt to each of a
 * host's addresses, whose own message is empty) and its code (ECONNREFUSED, a SQLSTATE).
 */
function causeOf({ cause }: DependencyUnavailableError): { reason?: string; code?: unknown } {
  if (!(cause instanceof Error)) return {};
  const attempts = cause instanceof AggregateError ? cause.errors.map((each) => String(each?.message)) : [];
  return { reason: cause.message || attempts.join('; '), code: (cause as { code?: unknown }).code };
}

/** The catalog error that an error becomes, and what is logged of it. */
function toGatewayError(error: FastifyError, request: FastifyRequest): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error.validation) {
    const where = error.validationContext ?? 'body';
    return new GatewayError(
      'VALIDATION_FAILED',
      error.validation.map(
        (v) => `${where}${v.instancePath.replaceAll('/', '.')} ${v.message ?? 'is invalid'}`,
      ),
    );
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const code = (error.code && FASTIFY_ERRORS[error.code]) || 'BAD_REQUEST';
    const known = new GatewayError(code);
    return known.statusCode === status ? known : Object.assign(known, { statusCode: status });
  }
  // No line each: the pool says it once (db.ts), and tessera_errors_total counts them.
  if (error instanceof DependencyBusyError) return new GatewayError('SERVER_BUSY');
  if (error instanceof DependencyUnavailableError) {
    // One short line: an outage fails every request that meets it, and its connection's own
    // warning already tells the outage (a stack each would be ~3 KB of log per request).
    request.log.warn(causeOf(error), `${error.dependency} unavailable`);
    return new GatewayError('DEPENDENCY_UNAVAILABLE');
  }
  request.log.error({ err: error }, 'unhandled error');
  return new GatewayError('INTERNAL');
}

/** The header naming an answer's error by its stable code (errors.ts), for clients to branch on. */
const ERROR_CODE_HEADER = 'tessera-error-code';

/** Answers `error`; `dependency` names the one out of reach (or full) for a 503 of an outage. */
function send(reply: FastifyReply, clock: Clock, error: GatewayError, dependency?: string) {
  errorsAnswered.add(1, dependency ? { code: error.code, dependency } : { code: error.code });
  reply.header(ERROR_CODE_HEADER, error.code);
  if (error.retryAfter !== undefined) reply.header('retry-after', String(Math.max(1, error.retryAfter)));
  // A 401 says how to authenticate (RFC 9110), in the bearer scheme's words (RFC 6750).
  if (error.statusCode === 401)
    reply.header(
      'www-authenticate',
      error.code === 'BEARER_MISSING' ? 'Bearer' : 'Bearer error="invalid_token"',
    );
  return reply
    .status(error.statusCode)
    .send(failure(error.statusCode, [statusMessage(error.statusCode), ...error.details], clock.now()));
}

// A refused body is read and dropped up to this much (and this long) before the 413 goes out, so a
// client still sending it gets the answer instead of a reset; beyond it the connection is cut.
const DISCARD_BYTES = 16 * 1024 * 1024;
const DISCARD_MS = 5000;

// How long a CONNECT's connection may stay, its answer and those before it included.
const CONNECT_MS = 5000;

// Requests that asked to send their body (Expect: 100-continue) and were not asked to: it is too large.
const uninvited = new WeakSet<IncomingMessage>();

function discardBody(raw: IncomingMessage): Promise<void> {
  // A client told no 100 Continue sends no body (RFC 9110 §10.1.1): none to wait for.
  if (raw.complete || raw.destroyed || uninvited.has(raw)) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = () => {
      clearTimeout(timer);
      raw.off('data', onData).off('end', done).off('error', done).off('close', done);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > DISCARD_BYTES) done();
    };
    const timer = setTimeout(done, DISCARD_MS);
    raw.on('data', onData).on('end', done).on('error', done).on('close', done).resume();
  });
}

/** Fastify's `frameworkErrors`: a malformed URL or header fails before routing, still enveloped. */
export function frameworkErrors({ appEnv, clock }: ErrorHandlerOptions) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    // No hooks run for these, so the headers every other response gets are set here.
    reply.headers(hooklessSecurityHeaders(appEnv));
    reply.header('x-request-id', request.id);
    const status = error.statusCode && error.statusCode < 500 ? error.statusCode : 400;
    send(reply, clock, Object.assign(new GatewayError('BAD_REQUEST'), { statusCode: status }));
    // Nor does the request's log line: the id the client got must be found in the logs.
    request.log.info({ req: request, res: reply }, 'request completed');
    return reply;
  };
}

// What a request the gateway never saw whole is told, by the code its clientError says.
const UNREAD: Partial<Record<ErrorCode, string>> = {
  BAD_REQUEST: 'The request is not HTTP/1.1 the gateway can read',
  REQUEST_TIMEOUT: 'The request did not arrive whole in time',
  HEADERS_TOO_LARGE: 'The request headers are too large',
};

export type ServerSocket = Socket & {
  // The answer under way, and the parser's request (whose body may still be arriving): Node's own.
  _httpMessage?: (ServerResponse & { req: IncomingMessage }) | null;
  parser?: { incoming?: IncomingMessage | null } | null;
};
const answering = new WeakSet<Socket>();

/**
 * Node's `clientError`: a request too broken to parse (bad request line, huge headers) gets an
 * envelope too, after the answers of the requests before it on the connection.
 */
export function clientErrorHandler(error: ConnectionError, socket: Socket) {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  if (answering.has(socket)) return;
  answering.add(socket);
  const code: ErrorCode =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 'HEADERS_TOO_LARGE'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'REQUEST_TIMEOUT'
        : 'BAD_REQUEST';
  // The parser fails on bytes after requests still being answered (pipelined, or sent past a body):
  // their answers go first. When it failed inside a request whose own answer has begun or gone (a URL
  // Fastify refused at once, then a bad chunk of its body), the connection just ends: a second answer
  // to one request would be read as the answer to the client's next. Otherwise that request gets this one.
  answerAfterPending(socket, () => rawAnswer(socket, code));
}

/**
 * `answer()` once the answers of the complete requests before it on the socket have gone (pipelined);
 * only the end of the connection if the request being read is incomplete and its answer has begun or gone.
 */
function answerAfterPending(socket: ServerSocket, answer: () => void) {
  const pending = socket._httpMessage;
  if (pending?.req.complete) pending.once('finish', () => answerAfterPending(socket, answer));
  else if (pending ? pending.headersSent : socket.parser?.incoming?.complete === false) socket.end();
  else answer();
}

/** An enveloped error written straight to a socket no request of the gateway's owns, which is then closed. */
function rawAnswer(socket: Socket, code: ErrorCode, detail = UNREAD[code]) {
  // Closed meanwhile (a `Connection: close` answer before it): nobody to answer.
  if (socket.writableEnded || socket.destroyed) return;
  errorsAnswered.add(1, { code });
  const status = ERRORS[code].status;
  // No request, so no app clock: the socket is all there is.
  const errors: [string, ...string[]] = [statusMessage(status), ...(detail ? [detail] : [])];
  const body = JSON.stringify(failure(status, errors, new Date()));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n${ERROR_CODE_HEADER}: ${code}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}

/**
 * The methods a path answers, by the router itself, to tell a wrong method (405) from an unknown path
 * (404). Catch-all routes (the CORS preflight's, the consoles' files) say nothing of a path.
 */
function methodsOf(app: FastifyInstance, path: string): string[] {
  return app.supportedMethods.filter((method) => {
    const route = app.findRoute({ method, url: path });
    return route !== null && !('*' in route.params);
  });
}

/** Turns every error and unknown route into the envelope of its catalog entry; never shows internals on a 5xx. */
export default fp<ErrorHandlerOptions>(
  async function errorHandler(app: FastifyInstance, { clock }) {
    // Expect: 100-continue. A body larger than the limit is refused before it is sent, not after.
    app.server.on('checkContinue', (request, response) => {
      if (Number(request.headers['content-length']) > (app.initialConfig.bodyLimit ?? 0))
        uninvited.add(request);
      else response.writeContinue();
      app.routing(request, response);
    });
    // CONNECT (a tunnel) is no request of the gateway's: Node would close the connection without a
    // word. Node hands the socket over without its error listener and timeouts: a reset would end the
    // process, and a client that never closes (or sends a byte now and then) would keep the socket.
    app.server.on('connect', (_request, socket: Socket) => {
      socket.on('error', () => socket.destroy());
      const deadline = setTimeout(() => socket.destroy(), CONNECT_MS);
      socket.once('close', () => clearTimeout(deadline));
      answerAfterPending(socket, () => rawAnswer(socket, 'BAD_REQUEST', 'CONNECT is not served here'));
    });
    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?')[0] ?? '';
      const allowed = methodsOf(app, path).sort();
      if (allowed.length === 0)
        return send(
          reply,
          clock,
          new GatewayError('ROUTE_NOT_FOUND', [`No route ${request.method} ${path}`]),
        );
      reply.header('allow', allowed.join(', '));
      return send(
        reply,
        clock,
        new GatewayError('METHOD_NOT_ALLOWED', [
          `${path} answers ${allowed.join(', ')}, not ${request.method}`,
        ]),
      );
    });
    app.setErrorHandler(async (error: FastifyError, request, reply) => {
      const answer = toGatewayError(error, request);
      if (answer.code === 'BODY_TOO_LARGE') {
        reply.header('connection', 'close');
        await discardBody(request.raw);
      }
      return send(
        reply,
        clock,
        answer,
        error instanceof DependencyUnavailableError ? error.dependency : undefined,
      );
    });
  },
  { name: 'error-handler' },
);
