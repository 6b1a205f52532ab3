/**
 * Starts OpenTelemetry before any application module loads:
 *   node --import @tessera/telemetry/register src/server.ts
 * Configured only by the standard OTEL_* variables. Without a traces exporter nothing is recorded
 * and the SDK is not even loaded, but trace context still flows: into log lines, and through jobs
 * from gateway to mailer. Metrics are always served at /metrics (Prometheus) rather than pushed;
 * logs stay pino on stdout.
 */
import { SHUTDOWN } from './shutdown.ts';

const env = process.env;
const exporting =
  Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) ||
  (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER !== 'none');
if (env.OTEL_METRICS_EXPORTER && env.OTEL_METRICS_EXPORTER !== 'none')
  console.warn(
    `OTEL_METRICS_EXPORTER=${env.OTEL_METRICS_EXPORTER} ignored: Tessera serves metrics at /metrics`,
  );
env.OTEL_METRICS_EXPORTER = 'none';
env.OTEL_LOGS_EXPORTER ??= 'none';

// Each mode loads only its own modules: the SDK and its exporters cost ~20 MB of a process's memory.
const shutdown = exporting
  ? (await import('./export-traces.ts')).exportTraces()
  : (await import('./propagate-traces.ts')).propagateTraces();
// The services' close handlers call it last (through shutdownTelemetry), so the final spans are sent.
Object.assign(globalThis, { [SHUTDOWN]: shutdown });
