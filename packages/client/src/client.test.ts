import { BroadcastChannel } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createClient } from './client.ts';
import { TesseraError } from './errors.ts';
import type { Fetch, FetchResponse } from './request.ts';
import { memoryStorage, type TokenSet, type TokenStorage } from './storage.ts';

const HOUR_MS = 3600 * 1000;
const baseUrl = 'http://tessera.test';

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

const envelope = (data: unknown): FetchResponse => ({
  status: 200,
  headers: { get: () => null },
  text: async () => JSON.stringify({ isSuccess: true, statusCode: 200, data, errors: [], timestamp: '' }),
});

/** The gateway's refresh and profile routes, in memory: each refresh issues the next pair. */
function fakeGateway() {
  const requests: string[] = [];
  let issued = 1;
  const fetch: Fetch = async (url, init) => {
    const path = new URL(url).pathname;
    requests.push(`${init.method} ${path}`);
    if (path === '/api/v1/auth/refresh-token') {
      issued += 1;
      return envelope({
        accessToken: `access-${issued}`,
        refreshToken: `refresh-${issued}`,
        expiresIn: 3600,
        refreshExpiresIn: 30 * 24 * 3600,
      });
    }
    return envelope({ _id: 'user-1', email: 'alice@example.com' });
  };
  return { fetch, requests };
}

/** A pair received at 0, so that a client whose clock stands an hour later refreshes it first. */
const SIGNED_IN: TokenSet = {
  accessToken: 'access-1',
  refreshToken: 'refresh-1',
  expiresIn: 3600,
  refreshExpiresIn: 30 * 24 * 3600,
  receivedAt: 0,
};

/** A store of the application's own (a keychain, a row of a session table): not a memoryStorage(). */
function ownStore(key: string, initial: TokenSet | null = null): TokenStorage {
  let tokens = initial;
  return {
    key,
    get: () => tokens,
    set(next) {
      tokens = next;
    },
    clear() {
      tokens = null;
    },
  };
}

describe('createClient on memory storage (a server making a client per request)', () => {
  /** Every BroadcastChannel opened from now on, and whether it was closed. */
  function recordChannels() {
    const channels: Array<{ name: string; closed: boolean }> = [];
    vi.stubGlobal(
      'BroadcastChannel',
      class extends BroadcastChannel {
        readonly record: { name: string; closed: boolean };
        constructor(name: string) {
          super(name);
          this.record = { name, closed: false };
          channels.push(this.record);
        }
        override close() {
          this.record.closed = true;
          super.close();
        }
      },
    );
    return channels;
  }

  it('opens no BroadcastChannel, which nothing else could join and which would keep the client reachable', async () => {
    const channels = recordChannels();
    const { fetch } = fakeGateway();

    for (const storage of [undefined, memoryStorage()]) {
      const client = createClient({ baseUrl, fetch, ...(storage && { storage }) });
      expect(await client.isSignedIn()).toBe(false);
    }

    expect(channels).toEqual([]);
  });

  it('still opens one on a store other tabs may share, until close()', async () => {
    const channels = recordChannels();
    const { fetch } = fakeGateway();

    const client = createClient({ baseUrl, fetch, storage: ownStore('shared') });
    expect(channels).toEqual([{ name: `tessera-client:${baseUrl}:shared`, closed: false }]);
    client.close();

    expect(channels).toEqual([{ name: `tessera-client:${baseUrl}:shared`, closed: true }]);
  });
});

describe('createClient after close()', () => {
  it('still refreshes, reports the new pair and signs out, on its own', async () => {
    const { fetch } = fakeGateway();
    const storage = ownStore('closed', SIGNED_IN);
    const changes: Array<string | null> = [];
    const client = createClient({
      baseUrl,
      fetch,
      storage,
      now: () => HOUR_MS,
      onSessionChange: (tokens) => {
        changes.push(tokens?.refreshToken ?? null);
      },
    });
    client.close();

    expect(await client.users.me()).toMatchObject({ email: 'alice@example.com' });
    await client.signOutLocally();

    expect(changes).toEqual(['refresh-2', null]);
    expect(await storage.get()).toBeNull();
  });
});

describe('createClient with an onSessionChange that fails', () => {
  const failing = {
    throws: () => {
      throw new Error('session table write failed');
    },
    rejects: async () => {
      throw new Error('session table write failed');
    },
  };

  it.each(Object.entries(failing))(
    'that %s: logs it, and the calls and the tokens are as without it',
    async (_, onSessionChange) => {
      const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      try {
        const { fetch, requests } = fakeGateway();
        const storage = memoryStorage();
        await storage.set(SIGNED_IN);
        const client = createClient({ baseUrl, fetch, storage, now: () => HOUR_MS, onSessionChange });

        // The access token is expiring: the call refreshes first, and the callback hears of it.
        expect(await client.users.me()).toEqual({ _id: 'user-1', email: 'alice@example.com' });
        expect(await client.accessToken()).toBe('access-2');
        await client.signOutLocally();
        expect(await client.isSignedIn()).toBe(false);
        // A moment for the async callback's rejection to be handled, or to go unhandled.
        await new Promise((resolve) => setImmediate(resolve));

        expect(requests).toEqual(['POST /api/v1/auth/refresh-token', 'GET /api/v1/users/me']);
        expect(unhandled).toEqual([]);
        expect(logged.mock.calls).toEqual([
          ['@tessera/client: onSessionChange failed', new Error('session table write failed')],
          ['@tessera/client: onSessionChange failed', new Error('session table write failed')],
        ]);
      } finally {
        process.off('unhandledRejection', onUnhandled);
      }
    },
  );
});

describe('createClient on a storage of your own that answers something else than a token set', () => {
  it.each([
    ['an empty object', {}],
    ['snake_case fields', { access_token: 'access-1', refresh_token: 'refresh-1' }],
    ['the text "null"', 'null'],
  ])('holding %s, is signed out: calls fail with 401 unsent', async (_, stored) => {
    const { fetch, requests } = fakeGateway();
    const storage = { ...ownStore('old-format'), get: () => stored as unknown as TokenSet };
    const client = createClient({ baseUrl, fetch, storage });

    expect(await client.isSignedIn()).toBe(false);
    expect(await client.accessToken()).toBeNull();
    const error = await client.users.me().catch((reason: unknown) => reason);

    expect(error).toBeInstanceOf(TesseraError);
    expect(error).toMatchObject({ status: 401, messages: ['Authentication required'] });
    expect(requests).toEqual([]);
    client.close();
  });
});

describe('createClient when a refresh gets no answer at all (lost on the way)', () => {
  afterEach(() => vi.useRealTimers());

  it('asks again after 5 s, fails the call after `timeout`, gives up after a minute, and refreshes again next time', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const gateway = fakeGateway();
    let lost = true;
    let attempts = 0;
    const fetch: Fetch = (url, init) => {
      if (!lost || new URL(url).pathname !== '/api/v1/auth/refresh-token') return gateway.fetch(url, init);
      attempts += 1;
      return new Promise(() => undefined);
    };
    const storage = ownStore('lost-refresh', SIGNED_IN);
    const tessera = createClient({ baseUrl, storage, fetch, now: () => HOUR_MS });

    const call = tessera.users.me().catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(attempts).toBe(2);
    await vi.advanceTimersByTimeAsync(25_000);
    expect(await call).toMatchObject({ status: 0, messages: ['The server did not answer in time'] });

    // Both attempts give up a minute after each was sent; the tokens stay, and the next call refreshes.
    await vi.advanceTimersByTimeAsync(35_000);
    expect(await storage.get()).toEqual(SIGNED_IN);
    lost = false;
    expect(await tessera.users.me()).toMatchObject({ email: 'alice@example.com' });
    expect((await storage.get())?.refreshToken).toBe('refresh-2');
    expect(attempts).toBe(2);
    tessera.close();
  });
});

describe('createClient when the first refresh gets no answer and the second does', () => {
  afterEach(() => vi.useRealTimers());

  /** The refresh route: the first request never answered (its signal kept), the next one as `second`. */
  function firstRefreshLost(second: () => Promise<FetchResponse>) {
    const gateway = fakeGateway();
    const signals: unknown[] = [];
    const fetch: Fetch = (url, init) => {
      if (new URL(url).pathname !== '/api/v1/auth/refresh-token') return gateway.fetch(url, init);
      signals.push((init as { signal?: unknown }).signal);
      return signals.length === 1 ? new Promise(() => undefined) : second();
    };
    return { fetch, signals };
  }

  it('takes the second answer and aborts the first request, which would hold the process for a minute', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const gateway = fakeGateway();
    const { fetch, signals } = firstRefreshLost(() =>
      gateway.fetch(`${baseUrl}/api/v1/auth/refresh-token`, { method: 'POST', headers: {} }),
    );
    const tessera = createClient({
      baseUrl,
      storage: ownStore('second-answer', SIGNED_IN),
      fetch,
      now: () => HOUR_MS,
    });

    const me = tessera.users.me();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await me).toMatchObject({ email: 'alice@example.com' });
    expect(signals).toHaveLength(2);
    expect((signals[0] as AbortSignal).aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    tessera.close();
  });

  it("waits for a slow first answer when the second is refused for another reason (a 429): it holds the rotation's pair", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const gateway = fakeGateway();
    const limited: FetchResponse = {
      status: 429,
      headers: { get: () => '30' },
      text: async () =>
        JSON.stringify({
          isSuccess: false,
          statusCode: 429,
          data: null,
          errors: ['Too many requests'],
          timestamp: '',
        }),
    };
    let attempts = 0;
    const fetch: Fetch = (url, init) => {
      if (new URL(url).pathname !== '/api/v1/auth/refresh-token') return gateway.fetch(url, init);
      attempts += 1;
      if (attempts > 1) return Promise.resolve(limited);
      return new Promise((resolve) => setTimeout(() => resolve(gateway.fetch(url, init)), 8_000));
    };
    const storage = ownStore('slow-then-limited', SIGNED_IN);
    const tessera = createClient({ baseUrl, storage, fetch, now: () => HOUR_MS });

    const me = tessera.users.me();
    await vi.advanceTimersByTimeAsync(8_000);
    expect(await me).toMatchObject({ email: 'alice@example.com' });
    expect((await storage.get())?.refreshToken).toBe('refresh-2');
    tessera.close();
  });

  it("fails at once with the gateway's 401 to the second, and signs out, instead of waiting for the first", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const refused: FetchResponse = {
      status: 401,
      headers: { get: () => null },
      text: async () =>
        JSON.stringify({
          isSuccess: false,
          statusCode: 401,
          data: null,
          errors: ['Unauthorized'],
          timestamp: '',
        }),
    };
    const { fetch } = firstRefreshLost(async () => refused);
    const storage = ownStore('second-refused', SIGNED_IN);
    const tessera = createClient({ baseUrl, storage, fetch, now: () => HOUR_MS });

    const me = tessera.users.me().catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await me).toMatchObject({ status: 401 });
    expect(await storage.get()).toBeNull();
    tessera.close();
  });
});
