import { storageFailed } from './errors.ts';
import type { TokenPair } from './types.ts';

/** The tokens the client holds: the server's pair, and when it was asked for (ms since the epoch). */
export type TokenSet = TokenPair & { receivedAt: number };

type MaybePromise<T> = T | Promise<T>;

/**
 * Where the client keeps its tokens. Each method may answer directly or with a promise, so both
 * synchronous stores (memory, localStorage) and asynchronous ones (React Native's AsyncStorage,
 * IndexedDB, a keychain) fit; the client always awaits them and reads the store before every call,
 * so tabs sharing a store see each other's tokens at once. `key` names the store: tabs whose clients
 * have the same base URL and key coordinate their refreshes.
 */
export interface TokenStorage {
  readonly key: string;
  get(): MaybePromise<TokenSet | null>;
  set(tokens: TokenSet): MaybePromise<void>;
  clear(): MaybePromise<void>;
  /**
   * Optional, for a store other contexts write to: calls `listener` with what is stored now whenever
   * another context changed it (a sign-in or sign-out in another tab); returns how to stop.
   */
  watch?(listener: (tokens: TokenSet | null) => void): () => void;
}

/**
 * `storage` whose failures are TesseraErrors, as every failure of the client is, and whose answers
 * are token sets or null: what does not have the shape of one (another version's format, an empty
 * object) is no session, as `localStorageStorage` reads text that is not one.
 */
export function guarded(storage: TokenStorage): TokenStorage {
  const guard =
    <Args extends unknown[], Result>(method: (...args: Args) => MaybePromise<Result>) =>
    async (...args: Args): Promise<Result> => {
      try {
        return await method.apply(storage, args);
      } catch (cause) {
        throw storageFailed(cause);
      }
    };
  const get = guard(storage.get);
  const watch = storage.watch?.bind(storage);
  return {
    key: storage.key,
    get: async () => asTokenSet(await get()),
    set: guard(storage.set),
    clear: guard(storage.clear),
    ...(watch && { watch: (listener) => watch((tokens) => listener(asTokenSet(tokens))) }),
  };
}

/** The stores of `memoryStorage()`, which no other JavaScript context can reach. */
const contextLocal = new WeakSet<TokenStorage>();

/**
 * Whether `storage` is a `memoryStorage()`: no other tab or worker can hold its tokens, so the
 * clients on it need no channel to them (which in Node would keep each client reachable until closed).
 */
export const isContextLocal = (storage: TokenStorage): boolean => contextLocal.has(storage);

/**
 * Tokens in this JavaScript context only: gone on reload, not shared with other tabs. The default.
 * Each store has a key of its own, so clients on separate stores (a server calling for many users)
 * never wait for each other's refresh; clients given the same store still share one.
 */
export function memoryStorage(): TokenStorage {
  // Random, so also unique across the workers of a process, which share Web Locks and channel
  // names; only uniqueness matters, not secrecy (and React Native has no `crypto.randomUUID`).
  const key = `memory:${Math.random().toString(36).slice(2)}`;
  let tokens: TokenSet | null = null;
  const store: TokenStorage = {
    key,
    get: () => tokens,
    set(next) {
      tokens = next;
    },
    clear() {
      tokens = null;
    },
  };
  contextLocal.add(store);
  return store;
}

interface WebStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}
/** The few members of the browser's `window` and its `storage` event used here (no DOM types needed). */
interface StorageEvents {
  addEventListener(type: 'storage', listener: (event: { key: string | null }) => void): void;
  removeEventListener(type: 'storage', listener: (event: { key: string | null }) => void): void;
}

/**
 * A page's localStorage: none outside a page, and none where the browser blocks it (every cookie
 * blocked, a sandboxed frame), which it says by throwing at `localStorage` itself.
 */
function pageLocalStorage(): WebStorage | undefined {
  try {
    // Only a page's: Node's Web Storage (`--localstorage-file`, on by default from Node 25) is one
    // file for the whole process, which would give every request of a server one user's tokens.
    const { window, localStorage } = globalThis as { window?: unknown; localStorage?: WebStorage };
    return window === undefined ? undefined : localStorage;
  } catch {
    return undefined;
  }
}

/**
 * Whether this page can keep tokens in localStorage (`localStorageStorage`): false outside a page, and
 * where the browser blocks or refuses storage. `hasLocalStorage() ? localStorageStorage() :
 * memoryStorage()` keeps a person signed in until the page is closed where it cannot.
 */
export function hasLocalStorage(): boolean {
  const storage = pageLocalStorage();
  if (!storage) return false;
  try {
    const probe = 'tessera.probe';
    storage.setItem(probe, '1');
    storage.removeItem(probe);
    return true;
  } catch {
    return false;
  }
}

/**
 * Tokens in the browser's `localStorage` under `key`: kept across reloads and shared by every tab of
 * the origin. Where there is no localStorage (server-side rendering, a worker, a page whose browser
 * blocks it) it holds nothing and refuses to store. Any script on the origin can read localStorage,
 * so pair it with a strict CSP.
 */
export function localStorageStorage(key = 'tessera.tokens'): TokenStorage {
  const read = () => {
    const text = pageLocalStorage()?.getItem(key);
    return text ? parseTokenSet(text) : null;
  };
  return {
    key,
    get: read,
    set(tokens) {
      const storage = pageLocalStorage();
      if (!storage) throw new Error('localStorageStorage: there is no localStorage here');
      storage.setItem(key, JSON.stringify(tokens));
    },
    clear() {
      pageLocalStorage()?.removeItem(key);
    },
    // The storage event fires in every other tab of the origin once a write reached it, which a
    // message between tabs may outrun; null key: the whole area was cleared.
    watch(listener) {
      const events = (globalThis as { window?: StorageEvents }).window;
      if (!events) return () => {};
      const onStorage = (event: { key: string | null }) => {
        if (event.key === key || event.key === null) listener(read());
      };
      events.addEventListener('storage', onStorage);
      return () => events.removeEventListener('storage', onStorage);
    },
  };
}

/**
 * The token set stored as `text` (JSON), or null when there is none or the text is not one (another
 * version wrote it, or a person edited it): for the `get()` of a storage of your own.
 */
export function parseTokenSet(text: string | null | undefined): TokenSet | null {
  if (text === null || text === undefined) return null;
  try {
    return asTokenSet(JSON.parse(text));
  } catch {
    return null;
  }
}

/** `value` when it has the shape of a token set (read from storage or from another tab), else null. */
export function asTokenSet(value: unknown): TokenSet | null {
  if (typeof value !== 'object' || value === null) return null;
  const { accessToken, refreshToken, expiresIn, refreshExpiresIn, receivedAt } = value as Record<
    string,
    unknown
  >;
  if (typeof accessToken !== 'string' || typeof refreshToken !== 'string') return null;
  if (typeof expiresIn !== 'number' || typeof refreshExpiresIn !== 'number' || typeof receivedAt !== 'number')
    return null;
  return { accessToken, refreshToken, expiresIn, refreshExpiresIn, receivedAt };
}
