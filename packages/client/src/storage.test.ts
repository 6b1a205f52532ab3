import { afterEach, expect, it, vi } from 'vitest';
import { createClient } from './client.ts';
import { TesseraError } from './errors.ts';
import { parseTokenSet } from './index.ts';
import { guarded, hasLocalStorage, localStorageStorage, type TokenSet } from './storage.ts';

afterEach(() => {
  vi.unstubAllGlobals();
});

const TOKENS: TokenSet = {
  accessToken: 'a.b.c',
  refreshToken: 'refresh-1',
  expiresIn: 3600,
  refreshExpiresIn: 2_592_000,
  receivedAt: 0,
};

it("localStorageStorage hears another tab's writes to its key through the storage event, until stopped", () => {
  // A browser's localStorage and window, as far as the storage uses them.
  const items = new Map<string, string>();
  vi.stubGlobal('localStorage', {
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => items.set(key, value),
    removeItem: (key: string) => items.delete(key),
  });
  const window = new EventTarget();
  vi.stubGlobal('window', window);
  const written = (key: string | null) => window.dispatchEvent(Object.assign(new Event('storage'), { key }));

  const heard: Array<string | null> = [];
  const stop = localStorageStorage('tokens').watch?.((tokens) => heard.push(tokens?.refreshToken ?? null));
  items.set('tokens', JSON.stringify(TOKENS));
  written('tokens');
  written('something.else');
  items.clear();
  written(null);
  stop?.();
  items.set('tokens', JSON.stringify(TOKENS));
  written('tokens');

  expect(heard).toEqual(['refresh-1', null]);
});

it('a storage that throws or rejects fails the client with a TesseraError that keeps the cause', async () => {
  const quota = new Error('QuotaExceededError');
  const storage = guarded({
    key: 'full',
    get: () => null,
    set() {
      throw quota;
    },
    clear: () => Promise.reject(quota),
  });

  for (const attempt of [storage.set(TOKENS), storage.clear()]) {
    const error = await Promise.resolve(attempt).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(TesseraError);
    expect(error).toMatchObject({
      status: 0,
      isNetworkError: false,
      messages: ['The token storage failed'],
      code: 'STORAGE_FAILED',
      cause: quota,
    });
  }
  expect(await storage.get()).toBeNull();
});

it("a storage failure's message does not quote what was stored: a corrupt token file stays in `cause`", async () => {
  // V8's JSON errors quote the text around the fault: here `..."eshToken":rt-secret-"...`.
  const corrupt = '{"accessToken":"a.b.c","refreshToken":rt-secret-part}';
  const storage = guarded({ key: 'file', get: () => JSON.parse(corrupt), set() {}, clear() {} });

  const error = await Promise.resolve(storage.get()).catch((reason: unknown) => reason);

  expect(error).toBeInstanceOf(TesseraError);
  expect(String(error)).not.toContain('rt-secret');
  expect((error as TesseraError).messages.join(' ')).not.toContain('rt-secret');
  expect((error as TesseraError).cause).toMatchObject({ message: expect.stringContaining('rt-secret') });
});

it('a storage answering something that is not a token set holds no session, as localStorageStorage reads garbage', async () => {
  for (const stored of [{}, { access_token: 'a.b.c', refresh_token: 'refresh-1' }, 'null', 42]) {
    const storage = guarded({
      key: 'old-format',
      get: () => stored as unknown as TokenSet,
      set() {},
      clear() {},
    });
    expect(await storage.get()).toBeNull();
  }
  const good = guarded({ key: 'good', get: () => TOKENS, set() {}, clear() {} });
  expect(await good.get()).toEqual(TOKENS);
});

it('parseTokenSet, exported for a storage of your own, reads a token set kept as text, and nothing else', () => {
  expect(parseTokenSet(JSON.stringify(TOKENS))).toEqual(TOKENS);
  for (const text of [
    null,
    undefined,
    '',
    'null',
    '{}',
    '{"accessToken":"a"',
    JSON.stringify({ ...TOKENS, expiresIn: '3600' }),
  ])
    expect(parseTokenSet(text)).toBeNull();
});

it('localStorageStorage holds nothing outside a page: Node with Web Storage has a localStorage but no window', async () => {
  // One file for every request of a server process (`--localstorage-file`, by default from Node 25).
  const items = new Map([['tessera.tokens', JSON.stringify(TOKENS)]]);
  vi.stubGlobal('localStorage', {
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => items.set(key, value),
    removeItem: (key: string) => items.delete(key),
  });
  expect((globalThis as { window?: unknown }).window).toBeUndefined();
  const storage = localStorageStorage();

  expect(await storage.get()).toBeNull();
  expect(() => storage.set({ ...TOKENS, refreshToken: 'another-user' })).toThrow(/no localStorage/);
  await storage.clear();
  expect(items.get('tessera.tokens')).toBe(JSON.stringify(TOKENS));
});

it('localStorageStorage holds nothing in a page whose browser blocks storage, and hasLocalStorage says so', async () => {
  // Chromium with every cookie blocked, or a sandboxed frame: reading `localStorage` itself throws.
  vi.stubGlobal('window', { addEventListener() {}, removeEventListener() {} });
  Object.defineProperty(globalThis, 'localStorage', {
    configurable: true,
    get() {
      throw new DOMException(
        "Failed to read the 'localStorage' property from 'Window': Access is denied",
        'SecurityError',
      );
    },
  });
  try {
    const storage = localStorageStorage();
    expect(await storage.get()).toBeNull();
    expect(() => storage.set(TOKENS)).toThrow(/no localStorage/);
    await storage.clear();
    expect(hasLocalStorage()).toBe(false);
    // An app that asks first is told "not signed in", not a failure.
    const fetch = vi.fn();
    const client = createClient({ baseUrl: 'https://auth.example.com', storage, fetch });
    expect(await client.isSignedIn()).toBe(false);
    expect(await client.accessToken()).toBeNull();
    expect(fetch).not.toHaveBeenCalled();
    client.close();
  } finally {
    Reflect.deleteProperty(globalThis, 'localStorage');
  }
});

it('hasLocalStorage is true in a page whose localStorage takes a write, false where it refuses one', () => {
  const items = new Map<string, string>();
  const area = {
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => items.set(key, value),
    removeItem: (key: string) => items.delete(key),
  };
  vi.stubGlobal('window', {});
  vi.stubGlobal('localStorage', area);
  expect(hasLocalStorage()).toBe(true);
  expect(items.size).toBe(0);
  area.setItem = () => {
    throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
  };
  expect(hasLocalStorage()).toBe(false);
});
