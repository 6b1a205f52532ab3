import type http from 'node:http';
import { context, propagation, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { AlwaysOffSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { UNTRACED } from './untraced.ts';

/**
 * No exporter: spans are never recorded, yet each request has a valid trace and span id (the
 * caller's trace or a new one), active for the whole request, written into `traceparent` of queued
 * jobs and read back by the mailer.
 *
 * The HTTP instrumentation is not loaded for this: it describes every request in attributes for a
 * span nobody sees (without it the gateway's CPU per request is ×0.83–0.97). Each request only gets a
 * non-recording span, active while the server's listener runs and in what it started: Fastify runs
 * the body's parsing, the handler and the response hooks in that context (e2e.test.ts checks it with
 * a body that arrives after the headers).
 */
export function propagateTraces(): () => Promise<void> {
  // Not `import`ed: an ES module's import of node:http reads its lazy exports too, and WebSocket loads
  // undici (~70 modules, a few MB) into a process that never uses it.
  const { Server } = process.getBuiltinModule('node:http');
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // Trace context only: a caller's `baggage` is its to fill (kilobytes), and would ride on every job.
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const provider = new TracerProvider({ sampler: new AlwaysOffSampler() });
  trace.setGlobalTracerProvider(provider);
  const tracer = provider.getTracer('tessera');

  type Emit = (this: http.Server, event: string, ...args: unknown[]) => boolean;
  const emit = Server.prototype.emit as Emit;
  Server.prototype.emit = function emitInTrace(this: http.Server, ...args: Parameters<Emit>) {
    const [event, request] = args as [string, http.IncomingMessage];
    if (event !== 'request' || UNTRACED.test(request.url ?? '')) return emit.apply(this, args);
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const active = trace.setSpan(parent, tracer.startSpan('request', undefined, parent));
    return context.with(active, emit, this, ...args);
  } as typeof Server.prototype.emit;
  return () => provider.shutdown();
}
