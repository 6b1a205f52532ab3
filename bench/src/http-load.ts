import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';

/** One HTTP request of a scenario. */
export interface Call {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  /** Bearer access token. */
  token?: string;
}

/**
 * Where a scenario's requests come from. `next` is asked for every request, and `settle` gets every
 * answer with the item that request was made from (a code, a session), so each request can use
 * something once and pass on what the answer gave back.
 */
export interface Feed<Item = unknown> {
  next(): { call: Call; item?: Item };
  settle?(status: number, body: string, item: Item | undefined): void;
}

export interface LoadResult {
  /** Answers received (any status). */
  responses: number;
  ok: number;
  /** Answers other than 2xx, by status, plus connection errors and timeouts. */
  failures: Record<string, number>;
  /** From the first request to the last answer. */
  seconds: number;
  /** Latencies of the 2xx answers, ms, sorted. */
  latencies: Float64Array;
}

export interface LoadShape {
  connections: number;
  /** Run for this many seconds (scenarios whose requests need nothing used up) … */
  duration?: number;
  /** … or make exactly this many requests (one per prepared item). */
  amount?: number;
}

interface Context {
  item?: unknown;
}

/** Drives `feed` against the gateway with autocannon: one request in flight per connection. */
export async function runLoad(baseUrl: string, feed: Feed, shape: LoadShape): Promise<LoadResult> {
  const connections =
    shape.amount === undefined ? shape.connections : Math.max(1, Math.min(shape.connections, shape.amount));
  const failures: Record<string, number> = {};
  const latencies: number[] = [];
  let responses = 0;
  let last = performance.now();

  const started = performance.now();
  let finish: (error: unknown, result: autocannon.Result) => void = () => {};
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    finish = (error, result) => (error ? reject(error) : resolve(result));
  });
  const options: autocannon.Options = {
    url: baseUrl,
    connections,
    pipelining: 1,
    ...(shape.amount === undefined ? { duration: shape.duration ?? 10 } : { amount: shape.amount }),
    // Ends within 100 ms of the last answer instead of the default 1 s.
    sampleInt: 100,
    requests: [
      {
        setupRequest(request, context) {
          const { call, item } = feed.next();
          (context as Context).item = item;
          const headers: Record<string, string> = { 'user-agent': 'tessera-bench' };
          if (call.body !== undefined) headers['content-type'] = 'application/json';
          if (call.token) headers.authorization = `Bearer ${call.token}`;
          return {
            ...request,
            method: call.method,
            path: call.path,
            headers,
            body: call.body === undefined ? '' : JSON.stringify(call.body),
          };
        },
        onResponse(status, body, context) {
          feed.settle?.(status, body, (context as Context).item);
        },
      },
    ],
  };
  const instance = autocannon(options, (error, result) => finish(error, result));
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    responses++;
    last = performance.now();
    if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
    else failures[statusCode] = (failures[statusCode] ?? 0) + 1;
  });
  const result = await done;
  if (result.errors > 0) failures.errors = result.errors - result.timeouts;
  if (result.timeouts > 0) failures.timeouts = result.timeouts;

  return {
    responses,
    ok: latencies.length,
    failures,
    seconds: (last - started) / 1000,
    latencies: Float64Array.from(latencies).sort(),
  };
}

/** The value below which `fraction` of the sorted values fall (nearest rank). */
export function percentile(sorted: ArrayLike<number>, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[rank] as number;
}
