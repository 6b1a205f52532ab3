import { context, ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api';
import { SamplingDecision } from '@opentelemetry/sdk-trace';
import { afterEach, expect, it } from 'vitest';
import { sampler } from './sampler.ts';

const TRACE_ID = 'f'.repeat(32);
const sampled = trace.setSpanContext(ROOT_CONTEXT, {
  traceId: 'a'.repeat(32),
  spanId: 'b'.repeat(16),
  traceFlags: TraceFlags.SAMPLED,
});
const decide = (name: string, kind: SpanKind, parent = context.active()) =>
  sampler().shouldSample(parent, TRACE_ID, name, kind, {}, []).decision;

afterEach(() => {
  delete process.env.OTEL_TRACES_SAMPLER;
  delete process.env.OTEL_TRACES_SAMPLER_ARG;
});

it("starts no trace for BullMQ's upkeep, and samples jobs and requests as configured", () => {
  for (const name of ['moveStalledJobsToWait email', 'startStalledCheckTimer email', 'close email'])
    expect(decide(name, SpanKind.INTERNAL), name).toBe(SamplingDecision.NOT_RECORD);
  expect(decide('process email', SpanKind.CONSUMER)).toBe(SamplingDecision.RECORD_AND_SAMPLED);
  expect(decide('add email.send-otp', SpanKind.PRODUCER)).toBe(SamplingDecision.RECORD_AND_SAMPLED);
  // Inside a request's trace, closing a queue is part of it.
  expect(decide('close email', SpanKind.INTERNAL, sampled)).toBe(SamplingDecision.RECORD_AND_SAMPLED);
});

it('follows OTEL_TRACES_SAMPLER otherwise', () => {
  process.env.OTEL_TRACES_SAMPLER = 'traceidratio';
  process.env.OTEL_TRACES_SAMPLER_ARG = '0';
  expect(decide('process email', SpanKind.CONSUMER)).toBe(SamplingDecision.NOT_RECORD);
  process.env.OTEL_TRACES_SAMPLER = 'parentbased_always_off';
  expect(decide('GET /api/v1/users/me', SpanKind.SERVER)).toBe(SamplingDecision.NOT_RECORD);
  expect(decide('process email', SpanKind.CONSUMER, sampled)).toBe(SamplingDecision.RECORD_AND_SAMPLED);
  process.env.OTEL_TRACES_SAMPLER = 'always_on';
  expect(decide('moveStalledJobsToWait email', SpanKind.INTERNAL)).toBe(SamplingDecision.NOT_RECORD);
});

it("decides a request's sampling itself, whatever its caller's traceparent says", () => {
  const caller = (traceFlags: TraceFlags) =>
    trace.setSpanContext(ROOT_CONTEXT, {
      traceId: 'a'.repeat(32),
      spanId: 'b'.repeat(16),
      traceFlags,
      isRemote: true,
    });
  // By default every request is recorded, also one whose caller asks not to be.
  expect(decide('POST /api/v1/auth/verify-otp-email', SpanKind.SERVER, caller(TraceFlags.NONE))).toBe(
    SamplingDecision.RECORD_AND_SAMPLED,
  );
  // Sampling none, a caller cannot force its requests in, by its flag or by the trace id it picks.
  process.env.OTEL_TRACES_SAMPLER = 'parentbased_traceidratio';
  process.env.OTEL_TRACES_SAMPLER_ARG = '0';
  expect(decide('GET /api/v1/users/me', SpanKind.SERVER, caller(TraceFlags.SAMPLED))).toBe(
    SamplingDecision.NOT_RECORD,
  );
  // A job follows the request that queued it, which the mailer sees as a remote parent too.
  expect(decide('process email', SpanKind.CONSUMER, caller(TraceFlags.SAMPLED))).toBe(
    SamplingDecision.RECORD_AND_SAMPLED,
  );
});

it.each(['always_on', 'always_off', 'traceidratio'])(
  'under %s, records a trace whole or not at all: every span inside it follows its parent',
  (name) => {
    process.env.OTEL_TRACES_SAMPLER = name;
    // A ratio of a half, and trace ids it samples and does not: a child must not be drawn again.
    process.env.OTEL_TRACES_SAMPLER_ARG = '0.5';
    const parent = (traceId: string, traceFlags: TraceFlags, isRemote = false) =>
      trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: 'b'.repeat(16), traceFlags, isRemote });
    for (const traceId of ['1'.padStart(32, '0'), 'f'.repeat(32)]) {
      const child = (flags: TraceFlags, kind = SpanKind.CLIENT, isRemote = false) =>
        sampler().shouldSample(parent(traceId, flags, isRemote), traceId, 'SELECT users', kind, {}, [])
          .decision;
      expect(child(TraceFlags.SAMPLED)).toBe(SamplingDecision.RECORD_AND_SAMPLED);
      expect(child(TraceFlags.NONE)).toBe(SamplingDecision.NOT_RECORD);
      // The mailer's work on a job the gateway queued, in the gateway's trace.
      expect(child(TraceFlags.SAMPLED, SpanKind.CONSUMER, true)).toBe(SamplingDecision.RECORD_AND_SAMPLED);
      expect(child(TraceFlags.NONE, SpanKind.CONSUMER, true)).toBe(SamplingDecision.NOT_RECORD);
    }
  },
);
