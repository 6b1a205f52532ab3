import { prettyInDevelopment, traceFields } from '@tessera/telemetry';
import { type FastifyReply, type FastifyRequest, type FastifyServerOptions, LogController } from 'fastify';
import type { DestinationStream } from 'pino';
import type { GatewayConfig } from './config.ts';

// A path is the client's to make up to 16 KB long: a line per request must not be that long.
const PATH_LOGGED = 200;
const loggedPath = (url: string) => {
  const path = url.split('?')[0] ?? '';
  return path.length > PATH_LOGGED ? `${path.slice(0, PATH_LOGGED)}…` : path;
};

/** The gateway's pino options: level, trace ids on every line, and nothing secret. */
export function loggerOptions(
  config: Pick<GatewayConfig, 'env' | 'log'>,
  stream?: DestinationStream,
): FastifyServerOptions['logger'] {
  return {
    level: config.log.level,
    // trace_id and span_id of the active span on every line written inside a request or job.
    mixin: traceFields,
    // Never the Redis command of a failed call: ioredis attaches it to the error, and a queued job's
    // data holds a code. Nor a Postgres error's detail and context, which quote the values of the
    // row or key at fault ("Failing row contains (…, ana@example.com, …)"). Only errors are
    // redacted, since redacting costs on every line it applies to.
    redact: ['err.command', 'err.cause.command', 'err.detail', 'err.where'],
    // A request is its method, path, and client address: never its body or headers (credentials),
    // nor its query string (the client's to fill, with whatever it likes).
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: loggedPath(request.url),
        remoteAddress: request.ip,
      }),
    },
    ...(stream ? { stream } : prettyInDevelopment(config.env, import.meta.url)),
  };
}

/**
 * One line per request at `info`, when it is answered: method, path, client address, status and
 * time (Fastify's own two lines would double the logging cost). The arrival only at `debug`.
 */
export class RequestLog extends LogController {
  override incomingRequest(request: FastifyRequest) {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply) {
    const fields = { req: request, res: reply, responseTime: Math.round(reply.elapsedTime * 10) / 10 };
    if (error) reply.log.error({ ...fields, err: error }, 'request errored');
    else reply.log.info(fields, 'request completed');
  }
}
