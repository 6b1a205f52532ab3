/**
 * Starts OpenTelemetry before any application module loads:
 *   node --import @tessera/telemetry/register src/server.ts
 * Configured only by the standard OTEL_* variables. Without an OTLP endpoint nothing is recorded or
 * exported, but trace context still flows: into log lines, and through jobs from gateway to mailer.
 * Metrics are always served at /metrics (Prometheus) rather than pushed; logs stay pino on stdout.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { register } from 'node:module';
import path from 'node:path';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { AlwaysOffSampler, NoopSpanProcessor } from '@opentelemetry/sdk-trace';
import { SHUTDOWN } from './shutdown.ts';

// ES modules are patched through a loader hook, registered before the application is imported.
register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);

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

const UNTRACED = /^\/(health|metrics)\b/;
// Paths only: a query string is the client's to fill, with whatever it likes.
const pathOf = (url: string | undefined) => (url ?? '').split('?')[0] ?? '';

// The incoming request starts the trace (and its id reaches logs and jobs) even when nothing is recorded.
const http = new HttpInstrumentation({
  ignoreIncomingRequestHook: (request) => UNTRACED.test(request.url ?? ''),
  requestHook: (span, request) => {
    if ('headers' in request && (request as IncomingMessage).url?.includes('?'))
      span.setAttribute('url.query', 'redacted');
  },
});
// The spans inside a request: only worth their cost when they are recorded.
const detail = () => [
  // The request span and its handler carry the route template; hooks get no spans of their own.
  new FastifyOtelInstrumentation({
    registerOnInitialization: true,
    instrumentHooks: false,
    ignorePaths: (route) => UNTRACED.test(route.url),
    requestHook: (span, request) => span.setAttribute('url.path', pathOf(request.url)),
  }),
  // Only inside a trace (not BullMQ's polling), and commands by name only: their arguments can hold
  // a queued job's code.
  new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
  new PgInstrumentation({ requireParentSpan: true }),
];

const sdk = new NodeSDK({
  ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: defaultServiceName() }),
  ...(exporting
    ? { instrumentations: [http, ...detail()] }
    : {
        instrumentations: [http],
        spanProcessors: [new NoopSpanProcessor()],
        sampler: new AlwaysOffSampler(),
      }),
});
sdk.start();
// The services' close handlers call it last (through shutdownTelemetry), so the final spans are sent.
Object.assign(globalThis, { [SHUTDOWN]: () => sdk.shutdown() });

/** `@tessera/auth-gateway` → `tessera-auth-gateway`, from the package of the script being run. */
function defaultServiceName(): string {
  for (let dir = path.dirname(path.resolve(process.argv[1] ?? '.')); ; dir = path.dirname(dir)) {
    try {
      const { name } = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
      return String(name).replace(/^@/, '').replace('/', '-');
    } catch {
      if (dir === path.dirname(dir)) return 'tessera';
    }
  }
}
