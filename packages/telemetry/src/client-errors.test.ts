import { type Span, type SpanStatus, SpanStatusCode } from '@opentelemetry/api';
import { expect, it } from 'vitest';
import { ignoreClientErrors } from './client-errors.ts';

/** What a span ends up with: the status at its end and the exceptions it recorded. */
function recordingSpan() {
  const seen: { status?: SpanStatus; exceptions: unknown[]; ended: boolean } = {
    exceptions: [],
    ended: false,
  };
  const span = {
    setStatus(status: SpanStatus) {
      seen.status = status;
      return span;
    },
    recordException(exception: unknown) {
      seen.exceptions.push(exception);
    },
    end() {
      seen.ended = true;
    },
  };
  return { span: span as unknown as Span, seen };
}

const failing = (statusCode: number) => Object.assign(new Error(`status ${statusCode}`), { statusCode });
const ERROR = { code: SpanStatusCode.ERROR, message: 'failed' };

it('leaves a span that failed with a 4xx unmarked, and marks one that failed with a 5xx', () => {
  const client = recordingSpan();
  ignoreClientErrors(client.span);
  client.span.setStatus(ERROR);
  client.span.recordException(failing(401));
  client.span.end();
  expect(client.seen).toEqual({ exceptions: [], ended: true });

  const server = recordingSpan();
  ignoreClientErrors(server.span);
  server.span.setStatus(ERROR);
  server.span.recordException(failing(500));
  server.span.end();
  expect(server.seen.status).toEqual(ERROR);
  expect(server.seen.exceptions).toHaveLength(1);
});

it('keeps a span ERROR once it recorded a server error, whatever it records after', () => {
  const { span, seen } = recordingSpan();
  ignoreClientErrors(span);
  span.setStatus(ERROR);
  span.recordException(failing(503));
  span.recordException(failing(400));
  span.end();
  expect(seen.status).toEqual(ERROR);
});
