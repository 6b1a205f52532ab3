import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { RuntimeNodeInstrumentation } from '@opentelemetry/instrumentation-runtime-node';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

// Metrics are pulled, never pushed: every process serves its own at /metrics in Prometheus text.
const prometheus = new PrometheusExporter({
  preventServerStart: true,
  // Prometheus labels each target itself (job, instance): no scope or target_info series.
  withoutScopeInfo: true,
  withoutTargetInfo: true,
});
const provider = new MeterProvider({ readers: [prometheus] });
metrics.setGlobalMeterProvider(provider);
// The process's own: event-loop delay and utilization, V8's heap and its garbage collections. The
// delay is sampled every 20 ms, not the default 10: at rest its timer is most of what a process does
// (0.48 s of CPU a minute with 10 ms, 0.33 with 20), and a stall shorter than that shows in neither.
new RuntimeNodeInstrumentation({ monitoringPrecision: 20 }).setMeterProvider(provider);

/** Tessera's meter; instruments made from it appear at /metrics. */
export const meter = metrics.getMeter('tessera');

// The process as Prometheus's own clients name it, read at each scrape: its memory (what an
// orchestrator's limit and the README's sizing count), its CPU time, and when it started (a restart
// shows as a new value, a crash loop as many).
meter
  .createObservableGauge('process.resident_memory_bytes', { description: 'Resident memory size in bytes' })
  .addCallback((result) => result.observe(process.memoryUsage.rss()));
meter
  .createObservableCounter('process.cpu_seconds', {
    description: 'Total user and system CPU time spent in seconds',
  })
  .addCallback((result) => {
    const { user, system } = process.cpuUsage();
    result.observe((user + system) / 1e6);
  });
meter
  .createObservableGauge('process.start_time_seconds', {
    description: 'Start time of the process since the Unix epoch in seconds',
  })
  .addCallback((result) => result.observe(Math.round(performance.timeOrigin) / 1000));

/** Answers a Prometheus scrape with every metric this process records. */
export function serveMetrics(request: IncomingMessage, response: ServerResponse): void {
  prometheus.getMetricsRequestHandler(request, response);
}
