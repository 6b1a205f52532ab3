import { createRequire } from 'node:module';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import { BullMQOtel } from 'bullmq-otel';

export { meter } from './metrics.ts';
export { observeQueueJobs } from './queue-jobs.ts';

/** pino `mixin`: the trace and span of the active span on every log line written inside one. */
export function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan()?.spanContext();
  return span && isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : {};
}

/** BullMQ's telemetry interface: a job's spans join the trace of the request that queued it. */
export function bullmqTelemetry(): BullMQOtel {
  return new BullMQOtel({ tracerName: 'tessera', meterName: 'tessera', enableMetrics: true });
}

export { closeGracefully } from './lifecycle.ts';
export {
  checkReadiness,
  NotReadyError,
  type OperationsServer,
  type ReadinessChecks,
  startOperationsServer,
} from './operations.ts';

/**
 * pino options for development: pretty lines through pino-pretty when it is installed next to
 * `from` (a service's `import.meta.url`); JSON otherwise, as in production images without dev tools.
 */
export function prettyInDevelopment(appEnv: string, from: string): { transport?: { target: string } } {
  if (appEnv !== 'development') return {};
  try {
    return { transport: { target: createRequire(from).resolve('pino-pretty') } };
  } catch {
    return {};
  }
}
