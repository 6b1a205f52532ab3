import { randomBytes } from 'node:crypto';
import { isSpanContextValid, ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace';

/**
 * BullMQ's upkeep, which it traces with no job or request behind it: the stalled-job check on a timer
 * (every few seconds in every mailer, with its Redis script as a child), starting that timer, a lock
 * renewal, closing a queue or worker at shutdown. Span names are `<operation> <queue>`.
 */
const HOUSEKEEPING = /^(moveStalledJobsToWait|startStalledCheckTimer|extendLocks|close) /;

/**
 * The sampler OTEL_TRACES_SAMPLER names decides whether a trace is recorded, when it starts:
 * - a trace that BullMQ's upkeep would start is not recorded;
 * - a request keeps its caller's trace id (`traceparent`), but whether it is recorded is decided
 *   here as for a new trace, on a trace id the caller did not choose: a client is anyone on the
 *   internet, and its sampled flag (or a trace id picked to pass a ratio) would let it keep its
 *   requests out of the traces, or force every one of them in.
 * Everything inside a request's or a job's trace (the queued job and the mailer's work on it
 * included) follows its parent, whatever the sampler: a trace is recorded whole or not at all.
 */
export function sampler(): Sampler {
  const configured = configuredSampler();
  return {
    shouldSample(context, traceId, name, kind, attributes, links) {
      const parent = trace.getSpanContext(context);
      if (parent === undefined || !isSpanContextValid(parent)) {
        if (kind === SpanKind.INTERNAL && HOUSEKEEPING.test(name))
          return { decision: SamplingDecision.NOT_RECORD };
        return configured.shouldSample(context, traceId, name, kind, attributes, links);
      }
      if (parent.isRemote && kind === SpanKind.SERVER)
        return configured.shouldSample(
          ROOT_CONTEXT,
          randomBytes(16).toString('hex'),
          name,
          kind,
          attributes,
          links,
        );
      return {
        decision:
          parent.traceFlags & TraceFlags.SAMPLED
            ? SamplingDecision.RECORD_AND_SAMPLED
            : SamplingDecision.NOT_RECORD,
      };
    },
    toString: () => `WholeTraces{${configured}}`,
  };
}

/**
 * What the SDK picks from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (the spec's values; its own
 * reader is not exported): parent-based always-on when unset or unknown.
 */
function configuredSampler(): Sampler {
  const arg = process.env.OTEL_TRACES_SAMPLER_ARG?.trim();
  const ratio = () => (arg && Number(arg) >= 0 && Number(arg) <= 1 ? Number(arg) : 1);
  switch (process.env.OTEL_TRACES_SAMPLER?.trim()) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}
