/** What a sign-in answers that the scenarios reuse. */
export interface SignedIn {
  accessToken: string;
  refreshToken: string;
}

export const API = '/api/v1/auth';

/** Reads the tokens out of a verify or refresh answer (the envelope's `data`); undefined when absent. */
export function tokensOf(body: string | unknown): SignedIn | undefined {
  try {
    const json = (typeof body === 'string' ? JSON.parse(body) : body) as {
      data?: { accessToken?: unknown; refreshToken?: unknown };
    };
    const { accessToken, refreshToken } = json.data ?? {};
    if (typeof accessToken !== 'string' || typeof refreshToken !== 'string') return undefined;
    return { accessToken, refreshToken };
  } catch {
    return undefined;
  }
}

/**
 * The few API calls that prepare a scenario (codes, sign-ins), made with fetch: what they cost is
 * not measured. Each throws with the answer when the gateway refuses, so a bad setup stops the run
 * instead of being measured.
 */
export class GatewayClient {
  readonly baseUrl: string;

  constructor(baseUrl: string) {
    this.baseUrl = baseUrl;
  }

  private async post(path: string, body: unknown): Promise<unknown> {
    const response = await fetch(`${this.baseUrl}${API}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'tessera-bench' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${text}`);
    return JSON.parse(text);
  }

  /** A fresh code for `email` (the gateway returns it when APP_ENV is test). */
  async sendCode(email: string): Promise<string> {
    const json = (await this.post('/send-otp-email', { email })) as { data?: { code?: unknown } };
    const code = json.data?.code;
    if (typeof code !== 'string') throw new Error('send-otp-email returned no code: is APP_ENV test?');
    return code;
  }

  async verify(email: string, code: string): Promise<SignedIn> {
    const tokens = tokensOf(await this.post('/verify-otp-email', { email, code }));
    if (!tokens) throw new Error('verify-otp-email returned no tokens');
    return tokens;
  }

  async signIn(email: string): Promise<SignedIn> {
    return this.verify(email, await this.sendCode(email));
  }
}

/** Runs `work` on every item, at most `limit` at a time, keeping the order of the items. */
export async function inParallel<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}
