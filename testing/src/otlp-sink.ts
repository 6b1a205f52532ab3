import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, unknown>;
  /** `code` 2 is ERROR; absent or 0, unset. */
  status: { code?: number; message?: string };
  events: { name: string; attributes: Record<string, unknown> }[];
}

export interface OtlpSink {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT, with OTEL_EXPORTER_OTLP_PROTOCOL=http/json. */
  url: string;
  spans: ReceivedSpan[];
  /** Every request body as received, for searching. */
  bodies: string[];
  waitFor(predicate: (span: ReceivedSpan) => boolean, timeoutMs?: number): Promise<ReceivedSpan>;
  close(): Promise<void>;
}

interface OtlpValue {
  [type: string]: unknown;
}
interface OtlpTraces {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: OtlpValue }[] };
    scopeSpans?: {
      spans?: {
        name: string;
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        attributes?: { key: string; value: OtlpValue }[];
        status?: { code?: number; message?: string };
        events?: { name: string; attributes?: { key: string; value: OtlpValue }[] }[];
      }[];
    }[];
  }[];
}

const attributesOf = (list: { key: string; value: OtlpValue }[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, Object.values(value)[0]]));

/** A real OTLP/HTTP (JSON) trace receiver on a free loopback port that keeps the spans it is sent. */
export async function startOtlpSink(): Promise<OtlpSink> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const server = http.createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (request.url === '/v1/traces') {
      bodies.push(Buffer.concat(chunks).toString());
      const body = JSON.parse(bodies.at(-1) ?? '{}') as OtlpTraces;
      for (const { resource, scopeSpans = [] } of body.resourceSpans ?? []) {
        const service = String(attributesOf(resource?.attributes)['service.name']);
        for (const { spans: list = [] } of scopeSpans)
          for (const span of list)
            spans.push({
              service,
              name: span.name,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId || undefined,
              attributes: attributesOf(span.attributes),
              status: span.status ?? {},
              events: (span.events ?? []).map((event) => ({
                name: event.name,
                attributes: attributesOf(event.attributes),
              })),
            });
      }
    }
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    async waitFor(predicate, timeoutMs = 10_000) {
      for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
        const found = spans.find(predicate);
        if (found) return found;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`No matching span within ${timeoutMs} ms (received ${spans.length})`);
    },
    async close() {
      server.close();
      server.closeAllConnections();
    },
  };
}
