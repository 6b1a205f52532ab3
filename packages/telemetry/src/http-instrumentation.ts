import type { IncomingMessage } from 'node:http';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { UNTRACED } from './untraced.ts';

/**
 * With an exporter: the incoming request's span starts the trace, or continues the caller's
 * (`traceparent`). Without one, propagate-traces.ts gives each request its trace context instead.
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
