import type { IncomingMessage } from 'node:http';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';

/** Probes and scrapes: never traced. */
export const UNTRACED = /^\/(health|metrics)\b/;

/**
 * The incoming request starts the trace, or continues the caller's (`traceparent`), so its id
 * reaches logs and jobs whether or not anything is recorded.
 */
export function httpInstrumentation(): HttpInstrumentation {
  return new HttpInstrumentation({
    ignoreIncomingRequestHook: (request) => UNTRACED.test(request.url ?? ''),
    // A query string is the client's to fill, with whatever it likes.
    requestHook: (span, request) => {
      if ('headers' in request && (request as IncomingMessage).url?.includes('?'))
        span.setAttribute('url.query', 'redacted');
    },
  });
}
