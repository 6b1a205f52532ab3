// biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted field by field
export type Json = Record<string, any>;

export interface JsonAnswer {
  status: number;
  headers: Headers;
  json: Json;
}

/**
 * Calls Tessera's HTTP API over the network as a client would: a JSON body when there is a payload,
 * the access token as a bearer, `headers` on every request. A request that hangs fails after 10 s
 * instead of stalling the test.
 */
export function jsonClient(baseUrl: string, headers: Record<string, string> = {}) {
  return async function call(
    method: string,
    path: string,
    payload?: unknown,
    accessToken?: string,
  ): Promise<JsonAnswer> {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(payload !== undefined && { 'content-type': 'application/json' }),
        ...(accessToken && { authorization: `Bearer ${accessToken}` }),
        ...headers,
      },
      body: payload === undefined ? undefined : JSON.stringify(payload),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: response.status, headers: response.headers, json: (await response.json()) as Json };
  };
}
