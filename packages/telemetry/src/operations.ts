import { once } from 'node:events';
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { failure, STATUS_MESSAGES, success } from '@tessera/contracts';
import { serveMetrics } from './metrics.ts';

/** `promise`, or a rejection once `ms` have passed: a probe or a scrape must not hang on a dependency. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Readiness checks by name (`postgres`, `redis`, `smtp`): each passes when its promise resolves in time. */
export type ReadinessChecks = Record<string, () => Promise<unknown>>;

/**
 * What a readiness check rejects with when its dependency answers but the service cannot use it yet:
 * its message is the reason the probe gives ("postgres schema is behind: run pnpm db:migrate")
 * instead of "<name> is down".
 */
export class NotReadyError extends Error {
  override name = 'NotReadyError';
}

/**
 * Runs every check at once; resolves with the reason of each that failed or took too long: the
 * message of a NotReadyError, "<name> is down" otherwise.
 */
export async function checkReadiness(checks: ReadinessChecks, timeoutMs: number): Promise<string[]> {
  const entries = Object.entries(checks);
  const results = await Promise.allSettled(
    entries.map(([name, check]) => withTimeout(Promise.resolve().then(check), timeoutMs, name)),
  );
  return entries.flatMap(([name], index) => {
    const result = results[index];
    if (result?.status !== 'rejected') return [];
    return [result.reason instanceof NotReadyError ? result.reason.message : `${name} is down`];
  });
}

export interface OperationsServerOptions {
  host: string;
  /** 0 picks a free port; `url` tells which. */
  port: number;
  checks: ReadinessChecks;
}

/** How long each readiness check may take; past it `/health/ready` answers 503 naming it. */
const CHECK_TIMEOUT_MS = 3000;

export interface OperationsServer {
  url: string;
  /** From now on `/health/ready` answers 503: the service is shutting down, its work finishing. */
  drain(): void;
  close(): Promise<void>;
}

/**
 * A service's operations port, for Prometheus and the orchestrator only: `GET /metrics`,
 * `GET /health/live` (the process answers) and `GET /health/ready` (every check passes, else 503).
 * Tessera envelopes; never rate-limited.
 */
export async function startOperationsServer({
  host,
  port,
  checks,
}: OperationsServerOptions): Promise<OperationsServer> {
  let draining = false;
  const server = http.createServer((request, response) => {
    const path = request.url?.split('?')[0];
    if (request.method !== 'GET') {
      reply(response, failure(405, [STATUS_MESSAGES[405], `Use GET, not ${request.method}`], new Date()), {
        allow: 'GET',
      });
    } else if (path === '/metrics') {
      serveMetrics(request, response);
    } else if (path === '/health/live') {
      reply(response, success({ status: 'ok' }, new Date()));
    } else if (path === '/health/ready' && draining) {
      reply(response, failure(503, ['Service unavailable', 'shutting down'], new Date()));
    } else if (path === '/health/ready') {
      void checkReadiness(checks, CHECK_TIMEOUT_MS).then(([first, ...rest]) =>
        reply(
          response,
          first
            ? failure(503, ['Service unavailable', first, ...rest], new Date())
            : success(Object.fromEntries(Object.keys(checks).map((name) => [name, 'up'])), new Date()),
        ),
      );
    } else {
      reply(response, failure(404, [STATUS_MESSAGES[404], `No route ${request.method} ${path}`], new Date()));
    }
  });
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  return {
    url: `http://${shownHost}:${address.port}`,
    drain: () => {
      draining = true;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // The jobs are done and the process is leaving: a keep-alive scraper must not hold it.
        server.closeAllConnections();
      }),
  };
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
