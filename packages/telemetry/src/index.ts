import type { IncomingMessage, ServerResponse } from 'node:http';
import { isSpanContextValid, metrics, trace } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BullMQOtel } from 'bullmq-otel';

// Metrics are pulled, never pushed: every process serves its own at /metrics in Prometheus text.
const prometheus = new PrometheusExporter({
  preventServerStart: true,
  // Prometheus labels each target itself (job, instance): no scope or target_info series.
  withoutScopeInfo: true,
  withoutTargetInfo: true,
});
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [prometheus] }));

/** Tessera's meter; instruments made from it appear at /metrics. */
export const meter = metrics.getMeter('tessera');

/** Answers a Prometheus scrape with every metric this process records. */
export function serveMetrics(request: IncomingMessage, response: ServerResponse): void {
  prometheus.getMetricsRequestHandler(request, response);
}

/** pino `mixin`: the trace and span of the active span on every log line written inside one. */
export function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan()?.spanContext();
  return span && isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : {};
}

/** BullMQ's telemetry interface: a job's spans join the trace of the request that queued it. */
export function bullmqTelemetry(): BullMQOtel {
  return new BullMQOtel({ tracerName: 'tessera', meterName: 'tessera', enableMetrics: true });
}

export { shutdownTelemetry } from './shutdown.ts';
