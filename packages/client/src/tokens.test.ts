import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BroadcastChannel } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { TabMessage } from './cross-tab.ts';
import { TesseraError } from './errors.ts';
import { memoryStorage, type TokenSet, type TokenStorage } from './storage.ts';
import { createTokenKeeper, isExpiring, type TokenKeeper } from './tokens.ts';
import type { TokenPair } from './types.ts';

const HOUR = 3600;

/**
 * The refresh route's rules in memory: each refresh token is exchanged once for a new pair, and
 * presented again (within the reuse grace) it gets the same successor pair back.
 */
function refreshServer() {
  let issued = 0;
  const live = new Set<string>();
  const successors = new Map<string, TokenPair>();
  const presented: string[] = [];
  const issue = (): TokenPair => {
    issued += 1;
    const pair = {
      accessToken: `access-${issued}`,
      refreshToken: `refresh-${issued}`,
      expiresIn: HOUR,
      refreshExpiresIn: 30 * 24 * HOUR,
    };
    live.add(pair.refreshToken);
    return pair;
  };
  return {
    presented,
    issue,
    async exchange(refreshToken: string): Promise<TokenPair> {
      presented.push(refreshToken);
      await sleep(10);
      const successor = successors.get(refreshToken);
      if (successor) return successor;
      if (!live.delete(refreshToken))
        throw new TesseraError({
          status: 401,
          messages: ['Unauthorized', 'Invalid refresh token'],
          code: 'REFRESH_TOKEN_INVALID',
        });
      const pair = issue();
      successors.set(refreshToken, pair);
      return pair;
    },
    /** Every session ends (logout elsewhere, reuse detection). */
    endAll() {
      live.clear();
      successors.clear();
    },
  };
}

let nowMs = Date.parse('2026-11-22T10:00:00.000Z');
const now = () => nowMs;
const keepers: TokenKeeper[] = [];
afterEach(() => {
  for (const keeper of keepers.splice(0)) keeper.close();
});

function keeper(
  server: ReturnType<typeof refreshServer>,
  name: string,
  storage: TokenStorage = memoryStorage(),
) {
  const changes: Array<TokenSet | null> = [];
  const tokens = createTokenKeeper({
    storage,
    name,
    now,
    exchange: server.exchange,
    onChange: (next) => changes.push(next),
  });
  keepers.push(tokens);
  return { tokens, storage, changes };
}

/**
 * One storage area shared by several tabs, as localStorage is: each tab's `watch` hears the writes of
 * the others, a moment after them, and never its own.
 */
function watchedArea() {
  let tokens: TokenSet | null = null;
  const listeners = new Map<symbol, (tokens: TokenSet | null) => void>();
  const written = (by: symbol) => {
    for (const [tab, listener] of listeners) if (tab !== by) setTimeout(() => listener(tokens), 5);
  };
  return {
    tab(): TokenStorage {
      const id = Symbol('tab');
      return {
        key: 'shared',
        get: () => tokens,
        set(next) {
          tokens = next;
          written(id);
        },
        clear() {
          tokens = null;
          written(id);
        },
        watch(listener) {
          listeners.set(id, listener);
          return () => listeners.delete(id);
        },
      };
    },
  };
}

/** The (real) BroadcastChannels that clients open from now on, in order: the first client's first. */
function recordChannels(): BroadcastChannel[] {
  const opened: BroadcastChannel[] = [];
  vi.stubGlobal(
    'BroadcastChannel',
    class extends BroadcastChannel {
      constructor(name: string) {
        super(name);
        opened.push(this);
      }
    },
  );
  return opened;
}

/**
 * Resolves once a message of `type` has reached `channel` and its client has handled it: this
 * listener runs after the client's, whose handling (on a memory storage) ends before the next task.
 */
function handled(channel: BroadcastChannel | undefined, type: TabMessage['type']): Promise<void> {
  return new Promise((resolve) => {
    channel?.addEventListener('message', (event: Event) => {
      if ((event as Event & { data: TabMessage }).data.type === type) setImmediate(resolve);
    });
  });
}

// Node 24 has Web Locks, as browsers do; React Native and older runtimes have none.
const LOCK_MODES = [
  { locks: true, title: 'with Web Locks' },
  { locks: false, title: 'without Web Locks' },
];

function withoutLocksUnless(locks: boolean) {
  beforeEach(() => {
    expect(typeof navigator.locks?.request).toBe('function');
    if (!locks) vi.stubGlobal('navigator', {});
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });
}

describe('isExpiring', () => {
  const tokens = (expiresIn: number): TokenSet => ({
    accessToken: 'a',
    refreshToken: 'r',
    expiresIn,
    refreshExpiresIn: 30 * 24 * HOUR,
    receivedAt: 0,
  });

  it('refreshes an hour-long access token in its last 30 seconds', () => {
    expect(isExpiring(tokens(HOUR), (HOUR - 31) * 1000)).toBe(false);
    expect(isExpiring(tokens(HOUR), (HOUR - 29) * 1000)).toBe(true);
    expect(isExpiring(tokens(HOUR), (HOUR + 10) * 1000)).toBe(true);
  });

  it('refreshes a short-lived access token in its last 10 %, not on every call', () => {
    expect(isExpiring(tokens(60), 53_000)).toBe(false);
    expect(isExpiring(tokens(60), 55_000)).toBe(true);
  });
});

describe.each(LOCK_MODES)('one client, $title', ({ locks }) => {
  withoutLocksUnless(locks);

  it('exchanges an expiring refresh token once for ten concurrent calls, and reports it once', async () => {
    const server = refreshServer();
    const { tokens, changes } = keeper(server, randomUUID());
    await tokens.signIn(server.issue(), nowMs);
    nowMs += HOUR * 1000;

    const results = await Promise.all(Array.from({ length: 10 }, () => tokens.fresh()));

    expect(server.presented).toEqual(['refresh-1']);
    expect(new Set(results.map((result) => result?.accessToken))).toEqual(new Set(['access-2']));
    expect(changes.map((change) => change?.accessToken)).toEqual(['access-1', 'access-2']);
  });

  it('does not exchange again a refresh token that a call before it already rotated', async () => {
    const server = refreshServer();
    const { tokens } = keeper(server, randomUUID());
    const first = await tokens.signIn(server.issue(), nowMs);

    const renewed = await tokens.refresh(first);
    // A call that sent the old access token and got its 401 after the refresh above.
    expect(await tokens.refresh(first)).toEqual(renewed);
    expect(server.presented).toEqual(['refresh-1']);
  });

  it("clears the tokens, reports the sign-out and fails with the server's refusal when the refresh is answered 401", async () => {
    const server = refreshServer();
    const { tokens, storage, changes } = keeper(server, randomUUID());
    await tokens.signIn(server.issue(), nowMs);
    server.endAll();
    nowMs += HOUR * 1000;

    // Why the session is over, in the gateway's code, for the call that needed the refresh.
    await expect(tokens.fresh()).rejects.toMatchObject({ status: 401, code: 'REFRESH_TOKEN_INVALID' });
    expect(await storage.get()).toBeNull();
    expect(changes.at(-1)).toBeNull();
    // Signed out now: no refresh to refuse.
    expect(await tokens.fresh()).toBeNull();
  });

  it.each([
    ['offline', 0, 'The server could not be reached'],
    // A proxy or firewall in the way: its page says nothing of the session.
    ["a 401 that is not the gateway's", 401, 'The server answered HTTP 401 without a Tessera envelope'],
  ])('keeps the tokens when the refresh fails for another reason (%s)', async (_, status, message) => {
    const server = refreshServer();
    const storage = memoryStorage();
    const failure = new TesseraError({ status, messages: [message], isNetworkError: true });
    const tokens = createTokenKeeper({
      storage,
      name: randomUUID(),
      now,
      exchange: () => Promise.reject(failure),
    });
    keepers.push(tokens);
    const held = await tokens.signIn(server.issue(), nowMs);
    nowMs += HOUR * 1000;

    await expect(tokens.fresh()).rejects.toBe(failure);
    expect(await storage.get()).toEqual(held);
  });
});

describe.each(LOCK_MODES)('two clients of the same name (two tabs), $title', ({ locks }) => {
  withoutLocksUnless(locks);

  it('sharing one storage (localStorage), refresh an expired pair together and end with the same one', async () => {
    const server = refreshServer();
    const name = randomUUID();
    const shared = memoryStorage();
    const a = keeper(server, name, shared);
    const b = keeper(server, name, shared);
    await a.tokens.signIn(server.issue(), nowMs);
    nowMs += HOUR * 1000;

    const [fromA, fromB] = await Promise.all([a.tokens.fresh(), b.tokens.fresh()]);

    expect(fromA?.accessToken).toBe('access-2');
    expect(fromB).toEqual(fromA);
    expect(await shared.get()).toEqual(fromA);
    // The lock lets the second tab find the first one's pair; without it both present the token and
    // the server's reuse grace gives them the same pair.
    expect(server.presented).toEqual(locks ? ['refresh-1'] : ['refresh-1', 'refresh-1']);
    expect(b.changes.map((change) => change?.accessToken)).toEqual(['access-2']);
  });

  it('each with its own storage holding the same pair, the second adopts the pair the first announces', async () => {
    const server = refreshServer();
    const name = randomUUID();
    const a = keeper(server, name);
    const b = keeper(server, name);
    const pair = server.issue();
    await a.tokens.signIn(pair, nowMs);
    await b.tokens.signIn(pair, nowMs);
    nowMs += HOUR * 1000;

    const renewed = await a.tokens.fresh();
    await vi.waitFor(() => expect(b.changes.at(-1)).toEqual(renewed), { timeout: 5000 });

    expect(await b.tokens.fresh()).toEqual(renewed);
    expect(server.presented).toEqual(['refresh-1']);
  });

  it('a refresh answered 401 in one signs the other out too', async () => {
    const server = refreshServer();
    const name = randomUUID();
    const a = keeper(server, name);
    const b = keeper(server, name);
    const pair = server.issue();
    const held = await a.tokens.signIn(pair, nowMs);
    await b.tokens.signIn(pair, nowMs);
    server.endAll();

    await expect(a.tokens.refresh(held)).rejects.toMatchObject({ code: 'REFRESH_TOKEN_INVALID' });
    await vi.waitFor(() => expect(b.changes.at(-1)).toBeNull(), { timeout: 5000 });
    expect(await b.storage.get()).toBeNull();
  });

  it("on a storage that tells of other tabs' writes (localStorage), each hears the other's sign-in and sign-out", async () => {
    const server = refreshServer();
    const name = randomUUID();
    const area = watchedArea();
    const a = keeper(server, name, area.tab());
    const before = keeper(server, name, area.tab());
    const signedIn = await a.tokens.signIn(server.issue(), nowMs);
    await vi.waitFor(() => expect(before.changes).toEqual([signedIn]), { timeout: 5000 });

    await a.tokens.signOut();

    await vi.waitFor(() => expect(before.changes).toEqual([signedIn, null]), { timeout: 5000 });
    expect(a.changes).toEqual([signedIn, null]);
  });

  it('sharing one storage, a client created after the sign-in (a reloaded page) hears the sign-out', async () => {
    const server = refreshServer();
    const name = randomUUID();
    const shared = memoryStorage();
    const a = keeper(server, name, shared);
    await a.tokens.signIn(server.issue(), nowMs);
    const after = keeper(server, name, shared);

    await a.tokens.signOut();

    await vi.waitFor(() => expect(after.changes).toEqual([null]), { timeout: 5000 });
  });

  it('with its own storage, a client is neither signed in nor out by the other', async () => {
    const server = refreshServer();
    const name = randomUUID();
    const channels = recordChannels();
    const a = keeper(server, name);
    const b = keeper(server, name);
    const signedOut = handled(channels[1], 'signed-out');

    await a.tokens.signIn(server.issue(), nowMs);
    await a.tokens.signOut();
    await signedOut;

    expect(b.changes).toEqual([]);
    expect(await b.storage.get()).toBeNull();
  });

  it('a client holding other tokens ignores what the first announces', async () => {
    const server = refreshServer();
    const name = randomUUID();
    const channels = recordChannels();
    const a = keeper(server, name);
    const b = keeper(server, name);
    // The refresh's message comes first: a channel delivers in order.
    const signedOut = handled(channels[1], 'signed-out');
    await a.tokens.signIn(server.issue(), nowMs);
    const own = await b.tokens.signIn(server.issue(), nowMs);

    await a.tokens.refresh((await a.storage.get()) as TokenSet);
    await a.tokens.signOut();
    await signedOut;

    expect(await b.storage.get()).toEqual(own);
    expect(b.changes).toEqual([own]);
  });
});
