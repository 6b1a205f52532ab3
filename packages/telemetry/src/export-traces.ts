import { readFileSync } from 'node:fs';
import { register } from 'node:module';
import path from 'node:path';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { register as registerInThread, supportsSyncHooks } from 'import-in-the-middle/register-hooks.mjs';
import { ignoreClientErrors } from './client-errors.ts';
import { httpInstrumentation } from './http-instrumentation.ts';
import { summarizeQuery } from './query-summary.ts';
import { sampler } from './sampler.ts';
import { UNTRACED } from './untraced.ts';

// Paths only: a query string is the client's to fill, with whatever it likes.
const pathOf = (url: string | undefined) => (url ?? '').split('?')[0] ?? '';

/**
 * An exporter is configured (OTEL_EXPORTER_OTLP_*, OTEL_TRACES_EXPORTER): the SDK records the spans
 * of the libraries Tessera uses (HTTP, Fastify, Postgres, Redis; BullMQ through its own telemetry
 * interface) and exports them as the OTEL_* variables say.
 */
export function exportTraces(): () => Promise<void> {
  // ES modules are patched through a loader hook, registered before the application is imported:
  // on the application's thread where Node allows, since a hooks thread costs ~30 MB.
  if (supportsSyncHooks()) registerInThread();
  else register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const sdk = new NodeSDK({
    ...(process.env.OTEL_SERVICE_NAME ? {} : { serviceName: defaultServiceName() }),
    sampler: sampler(),
    // Trace context only, as without an exporter (propagate-traces.ts), unless OTEL_PROPAGATORS says.
    ...(process.env.OTEL_PROPAGATORS ? {} : { textMapPropagator: new W3CTraceContextPropagator() }),
    instrumentations: [
      httpInstrumentation(),
      // The request span and its handler carry the route template; hooks get no spans of their own.
      // A 4xx is the client's mistake: neither span is marked ERROR for it.
      new FastifyOtelInstrumentation({
        registerOnInitialization: true,
        instrumentHooks: false,
        ignorePaths: (route) => UNTRACED.test(route.url),
        requestHook: (span, request) => {
          span.setAttribute('url.path', pathOf(request.url));
          ignoreClientErrors(span);
        },
        lifecycleHook: ignoreClientErrors,
      }),
      // Only inside a trace (not BullMQ's polling), and commands by name only: their arguments can
      // hold a queued job's code.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
      // Named `SELECT sessions`, `WITH users`… by the statement, not by its prepared statement's name
      // (a hash of its text). No `db.collection.name`: the conventions keep it for a table known
      // without parsing the query, which can name several.
      new PgInstrumentation({
        requireParentSpan: true,
        requestHook: (span, { query }) => {
          const summary = summarizeQuery(query.text);
          if (!summary) return;
          span.updateName(summary.summary);
          span.setAttribute('db.operation.name', summary.operation);
        },
      }),
    ],
  });
  sdk.start();
  return () => sdk.shutdown();
}

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
