import { type Span, type SpanStatus, SpanStatusCode } from '@opentelemetry/api';

/** An error answered with a 4xx (its `statusCode`, as Fastify reads it): the client's mistake. */
const isClientError = (error: unknown) => {
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' && status >= 400 && status < 500;
};

/**
 * Keeps a client's mistake (a wrong code, an ended session, a reused token: any error with a 4xx
 * `statusCode`) from marking `span` as failed, as OpenTelemetry's HTTP conventions say of a server's
 * 4xx; a 5xx stays ERROR, with its exception.
 *
 * For @fastify/otel's request and handler spans: it marks them ERROR for any error thrown, with no
 * option to tell a 4xx apart, and before the gateway's error handler runs (the handler's span has
 * ended by then). It sets the status (a message only) before it records the exception (the error
 * itself): so an ERROR is held until the span ends, and dropped, with the exception, for a 4xx.
 */
export function ignoreClientErrors(span: Span): void {
  const { setStatus, recordException, end } = span;
  let error: SpanStatus | undefined;
  let serverError = false;
  span.setStatus = (status) => {
    if (status.code === SpanStatusCode.ERROR) error = status;
    else setStatus.call(span, status);
    return span;
  };
  span.recordException = (exception, time) => {
    // Once the span has seen a server's error it stays ERROR, whatever comes after.
    if (isClientError(exception) && !serverError) error = undefined;
    else {
      serverError = true;
      recordException.call(span, exception, time);
    }
  };
  span.end = (time) => {
    if (error) setStatus.call(span, error);
    end.call(span, time);
  };
}
