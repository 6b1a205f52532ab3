/**
 * Starts OpenTelemetry before any application module loads:
 *   node --import @tessera/telemetry/register src/server.ts
 * Configured only by the standard OTEL_* variables. Without an OTLP endpoint nothing is sampled or
 * exported (trace context still flows into logs and jobs); metrics are served at /metrics instead of
 * pushed, and logs stay pino JSON on stdout.
 */
import { readFileSync } from 'node:fs';
import { register } from 'node:module';
import path from 'node:path';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';

// ES modules are patched through a loader hook, registered before the application is imported.
register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);

const env = process.env;
const exporting = Boolean(
  env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_TRACES_EXPORTER,
);
env.OTEL_TRACES_EXPORTER ??= exporting ? 'otlp' : 'none';
if (!exporting) env.OTEL_TRACES_SAMPLER ??= 'always_off';
env.OTEL_METRICS_EXPORTER ??= 'none';
env.OTEL_LOGS_EXPORTER ??= 'none';

const UNTRACED = /^\/(health|metrics)\b/;

const sdk = new NodeSDK({
  ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: defaultServiceName() }),
  instrumentations: [
    new HttpInstrumentation({ ignoreIncomingRequestHook: (request) => UNTRACED.test(request.url ?? '') }),
    // The request span and its handler carry the route template; hooks get no spans of their own.
    new FastifyOtelInstrumentation({
      registerOnInitialization: true,
      instrumentHooks: false,
      ignorePaths: (route) => UNTRACED.test(route.url),
    }),
    // Only inside a trace (not BullMQ's polling), and commands by name only: their arguments can
    // hold a queued job's code.
    new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    new PgInstrumentation({ requireParentSpan: true }),
  ],
});
sdk.start();
process.once('beforeExit', () => void sdk.shutdown());

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
