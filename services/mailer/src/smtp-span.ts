import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { maskAddressesInError, maskEmail } from './mask.ts';

export type Delivery = 'smtp' | 'outbox';

const tracer = trace.getTracer('tessera');

/**
 * Runs one delivery in an `smtp send` client span, a child of the job's span. The span names the
 * recipient masked only, and a failure is recorded with its addresses masked (the error is rethrown
 * masked too, so logs and the job's stored failure hold no address either). Never the message.
 */
export function inSmtpSpan<T>(to: string, delivery: Delivery, send: () => Promise<T>): Promise<T> {
  const attributes = { 'email.to.masked': maskEmail(to), 'smtp.delivery': delivery };
  return tracer.startActiveSpan('smtp send', { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      return await send();
    } catch (error) {
      maskAddressesInError(error, to);
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: error instanceof Error ? error.message : undefined,
      });
      throw error;
    } finally {
      span.end();
    }
  });
}
