import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** An OTLP/HTTP receiver on loopback that accepts every export at once and keeps only its size. */
export interface OtlpSink {
  /** What the services get as OTEL_EXPORTER_OTLP_ENDPOINT. */
  endpoint: string;
  /** Bytes received, by the service name an export carries (one of those given), else `other`. */
  received: Map<string, number>;
  close(): Promise<void>;
}

/**
 * Cheaper than @tessera/testing's sink on purpose: it takes the services' default protocol (protobuf),
 * which production sends, and neither parses nor keeps the spans (a run sends ~100 MB), so what is
 * measured is the services, not the receiver.
 *
 * `serviceNames`: the names to count exports by. An export is one process's batch, and its resource
 * carries the process's service name as plain bytes (OTLP protobuf, uncompressed: the default).
 */
export async function startOtlpSink(serviceNames: readonly string[]): Promise<OtlpSink> {
  const received = new Map<string, number>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const service = serviceNames.find((name) => body.includes(name)) ?? 'other';
      received.set(service, (received.get(service) ?? 0) + body.length);
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
