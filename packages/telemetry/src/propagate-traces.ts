import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { AlwaysOffSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { httpInstrumentation } from './http-instrumentation.ts';

/**
 * No exporter: spans are never recorded, yet each has a valid trace and span id (the caller's trace
 * or a new one), active for the whole request, written into `traceparent` of queued jobs and read
 * back by the mailer. Only the HTTP instrumentation runs: the others would make spans nobody sees.
 */
export function propagateTraces(): () => Promise<void> {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({
      propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
    }),
  );
  const provider = new TracerProvider({ sampler: new AlwaysOffSampler() });
  trace.setGlobalTracerProvider(provider);
  registerInstrumentations({ instrumentations: [httpInstrumentation()] });
  return () => provider.shutdown();
}
