import { parseRetryAfter, TesseraError } from './errors.ts';

/** The part of a WHATWG Response the client reads. */
export interface FetchResponse {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/** The part of WHATWG fetch the client uses: the global one of browsers, Node ≥ 18, workers and React Native fits. */
export type Fetch = (
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string },
) => Promise<FetchResponse>;

export interface Transport {
  baseUrl: string;
  fetch: Fetch;
  /** Milliseconds since the epoch. */
  now: () => number;
  /** Milliseconds a request may take, its body included; 0 (or Infinity) waits for ever. */
  timeout: number;
}

// The timer and abort globals used here, so the package needs no DOM or Node types.
interface Environment {
  setTimeout(callback: () => void, milliseconds: number): unknown;
  clearTimeout(timer: unknown): void;
  AbortController?: new () => { signal: unknown; abort(): void };
}
const env = globalThis as unknown as Environment;

class Timeout extends Error {}

// The longest wait a timer can count (about 24.8 days); a longer one fires at once.
const LONGEST_TIMER_MS = 2_147_483_647;

/**
 * `exchange`'s result, or a rejection once `timeout` ms have passed or `stop` resolves, either of
 * which also aborts `exchange`'s fetch.
 */
async function within<T>(
  timeout: number,
  exchange: (signal: unknown) => Promise<T>,
  stop?: Promise<void>,
): Promise<T> {
  // 0, Infinity, or anything no timer can count: no timeout.
  const bounded = timeout > 0 && timeout <= LONGEST_TIMER_MS;
  if (!bounded && stop === undefined) return exchange(undefined);
  const controller = env.AbortController ? new env.AbortController() : undefined;
  let timer: unknown;
  const ends: Promise<never>[] = [];
  if (bounded)
    ends.push(
      new Promise<never>((_, reject) => {
        timer = env.setTimeout(() => {
          controller?.abort();
          reject(new Timeout(`no answer within ${timeout} ms`));
        }, timeout);
      }),
    );
  if (stop !== undefined)
    ends.push(
      stop.then(() => {
        controller?.abort();
        throw new Error('no longer wanted');
      }),
    );
  try {
    // Raced as well as aborted: a fetch that ignores its signal cannot hold the caller.
    return await Promise.race([exchange(controller?.signal), ...ends]);
  } finally {
    env.clearTimeout(timer);
  }
}

const noAnswer = (cause: unknown) =>
  new TesseraError({
    status: 0,
    messages: ['The server did not answer in time'],
    isNetworkError: true,
    cause,
  });

/**
 * `promise`, or after `timeout` ms the error of a request that got no answer; `promise` goes on
 * (a refresh the call was waiting for still stores its answer when it comes).
 */
export async function atMost<T>(timeout: number, promise: Promise<T>): Promise<T> {
  try {
    return await within(timeout, () => promise);
  } catch (cause) {
    throw cause instanceof Timeout ? noAnswer(cause) : cause;
  }
}

/** What `promise` settles to within `ms`: its value or its error, or undefined while it is pending then. */
export function settledWithin<T>(
  promise: Promise<T>,
  ms: number,
): Promise<{ value: T } | { error: unknown } | undefined> {
  return new Promise((resolve) => {
    const timer = env.setTimeout(() => resolve(undefined), ms);
    promise.then(
      (value) => {
        env.clearTimeout(timer);
        resolve({ value });
      },
      (error: unknown) => {
        env.clearTimeout(timer);
        resolve({ error });
      },
    );
  });
}

export interface Call {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, number | undefined>;
  body?: unknown;
  accessToken?: string;
}

interface Envelope {
  isSuccess: boolean;
  statusCode: number;
  data: unknown;
  errors: string[];
}

function isEnvelope(value: unknown): value is Envelope {
  if (typeof value !== 'object' || value === null) return false;
  const { isSuccess, statusCode, errors } = value as Partial<Envelope>;
  return (
    typeof isSuccess === 'boolean' &&
    typeof statusCode === 'number' &&
    'data' in value &&
    Array.isArray(errors) &&
    errors.every((error) => typeof error === 'string')
  );
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function urlOf(baseUrl: string, path: string, query: Call['query'] = {}): string {
  const search = Object.entries(query)
    .filter((entry): entry is [string, number] => entry[1] !== undefined)
    .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`)
    .join('&');
  return `${baseUrl}${path}${search ? `?${search}` : ''}`;
}

/** Sends one request and returns the envelope's `data`; anything else is thrown as a TesseraError. */
export async function send<Data>(
  { baseUrl, fetch, now, timeout }: Transport,
  call: Call,
  /** Resolved when the answer is no longer wanted: the request is then aborted. */
  stop?: Promise<void>,
): Promise<Data> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (call.body !== undefined) headers['content-type'] = 'application/json';
  if (call.accessToken !== undefined) headers.authorization = `Bearer ${call.accessToken}`;
  const init = {
    method: call.method,
    headers,
    ...(call.body !== undefined && { body: JSON.stringify(call.body) }),
  };

  let response: FetchResponse;
  let text: string;
  try {
    [response, text] = await within(
      timeout,
      async (signal) => {
        // The signal is not in `Fetch`'s type, so that the DOM's fetch fits it without DOM types here;
        // a fetch passed in gets it all the same, and one that forwards `init` aborts with it.
        const answer = await fetch(
          urlOf(baseUrl, call.path, call.query),
          signal ? Object.assign({ signal }, init) : init,
        );
        return [answer, await answer.text()] as const;
      },
      stop,
    );
  } catch (cause) {
    throw cause instanceof Timeout
      ? noAnswer(cause)
      : new TesseraError({
          status: 0,
          messages: ['The server could not be reached'],
          isNetworkError: true,
          cause,
        });
  }
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'), now());
  const envelope = parseJson(text);
  if (!isEnvelope(envelope))
    throw new TesseraError({
      status: response.status,
      messages: [`The server answered HTTP ${response.status} without a Tessera envelope`],
      retryAfter,
      isNetworkError: true,
    });
  if (response.status < 200 || response.status >= 300 || !envelope.isSuccess)
    throw new TesseraError({
      status: response.status,
      messages: envelope.errors,
      code: response.headers.get('tessera-error-code') ?? undefined,
      retryAfter,
    });
  return envelope.data as Data;
}
