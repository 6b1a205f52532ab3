import { once } from 'node:events';
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { failure, success } from '@tessera/contracts';
import { serveMetrics } from '@tessera/telemetry';
import { withTimeout } from './with-timeout.ts';

const CHECK_TIMEOUT_MS = 3000;

export interface OperationsServerOptions {
  host: string;
  /** 0 picks a free port; `url` tells which. */
  port: number;
  /** Readiness checks by name (`redis`, `smtp`): each passes when its promise resolves within 3 s. */
  checks: Record<string, () => Promise<unknown>>;
  now?: () => Date;
}

export interface OperationsServer {
  url: string;
  close(): Promise<void>;
}

/**
 * The mailer's HTTP side, for Prometheus and the orchestrator only: `GET /metrics`, `GET /health/live`
 * (the process answers) and `GET /health/ready` (every check passes, else 503). Tessera envelopes.
 */
export async function startOperationsServer({
  host,
  port,
  checks,
  now = () => new Date(),
}: OperationsServerOptions): Promise<OperationsServer> {
  const server = http.createServer((request, response) => {
    const path = request.url?.split('?')[0];
    if (request.method !== 'GET') {
      reply(response, failure(405, [`Method ${request.method} not allowed`], now()), { allow: 'GET' });
    } else if (path === '/metrics') {
      serveMetrics(request, response);
    } else if (path === '/health/live') {
      reply(response, success({ status: 'ok' }, now()));
    } else if (path === '/health/ready') {
      void readiness(checks, now).then((envelope) => reply(response, envelope));
    } else {
      reply(response, failure(404, [`No route ${request.method} ${path}`], now()));
    }
  });
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  return {
    url: `http://${shownHost}:${address.port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // The jobs are done and the process is leaving: a keep-alive scraper must not hold it.
        server.closeAllConnections();
      }),
  };
}

async function readiness(checks: OperationsServerOptions['checks'], now: () => Date) {
  const entries = Object.entries(checks);
  const results = await Promise.allSettled(
    entries.map(([name, check]) => withTimeout(Promise.resolve().then(check), CHECK_TIMEOUT_MS, name)),
  );
  const [first, ...rest] = entries
    .filter((_, index) => results[index]?.status === 'rejected')
    .map(([name]) => `${name} is down`);
  if (first) return failure(503, [first, ...rest], now());
  return success(Object.fromEntries(entries.map(([name]) => [name, 'up'])), now());
}

function reply(
  response: ServerResponse,
  envelope: { statusCode: number },
  headers: Record<string, string> = {},
): void {
  response.writeHead(envelope.statusCode, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...headers,
  });
  response.end(JSON.stringify(envelope));
}
