import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

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
