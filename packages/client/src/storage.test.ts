import { afterEach, expect, it, vi } from 'vitest';
import { TesseraError } from './errors.ts';
import { guarded, localStorageStorage, type TokenSet } from './storage.ts';

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
      messages: ['The token storage failed', 'QuotaExceededError'],
      cause: quota,
    });
  }
  expect(await storage.get()).toBeNull();
});
