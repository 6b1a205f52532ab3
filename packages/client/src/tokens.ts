import { crossTab, type TabMessage } from './cross-tab.ts';
import { isRefusal, type TesseraError } from './errors.ts';
import type { TokenSet, TokenStorage } from './storage.ts';
import type { TokenPair } from './types.ts';

export interface TokenKeeperOptions {
  storage: TokenStorage;
  /** Of the Web Lock and the BroadcastChannel that clients sharing these tokens coordinate through. */
  name: string;
  /** True when no other context can hold these tokens (a memory store): no BroadcastChannel then. */
  contextLocal?: boolean;
  now: () => number;
  /** Exchanges a refresh token for a new pair (`POST /api/v1/auth/refresh-token`). */
  exchange(refreshToken: string): Promise<TokenPair>;
  /** The application's; what it throws or rejects with is logged, and fails nothing. */
  onChange?: ((tokens: TokenSet | null) => void) | undefined;
}

export interface TokenKeeper {
  current(): Promise<TokenSet | null>;
  /**
   * The tokens with an access token that is not about to expire (refreshed first if it is); null when
   * signed out. Rejects as `refresh` does when that refresh is refused.
   */
  fresh(): Promise<TokenSet | null>;
  /**
   * Replaces the tokens `basis` by new ones: one exchange at a time however many callers ask (single
   * flight in this client, a Web Lock across tabs), and none when another caller or tab already
   * rotated `basis`; null when signed out meanwhile. When the server refuses the refresh token, the
   * tokens are cleared and it rejects with the server's refusal (its `code` says why the session is
   * over).
   */
  refresh(basis: TokenSet): Promise<TokenSet | null>;
  signIn(pair: TokenPair, receivedAt: number): Promise<TokenSet>;
  signOut(): Promise<void>;
  close(): void;
}

const REFRESH_AHEAD_MS = 30_000;
const REFRESH_AHEAD_FRACTION = 0.1;

/** True when less than 30 s or 10 % of the access token's lifetime remains, whichever is shorter. */
export function isExpiring(tokens: TokenSet, nowMs: number): boolean {
  const lifetime = tokens.expiresIn * 1000;
  const left = tokens.receivedAt + lifetime - nowMs;
  return left < Math.min(REFRESH_AHEAD_MS, lifetime * REFRESH_AHEAD_FRACTION);
}

// The one global used here beside the cross-tab ones, so the package needs no DOM or Node types.
const { console } = globalThis as unknown as { console?: { error(...data: unknown[]): void } };

/**
 * Logs what failed where nobody awaits it, rather than leave it an unhandled rejection, which ends a
 * Node process: a server must not go down because one user's callback or storage failed.
 */
const logFailure = (what: string) => (error: unknown) => {
  console?.error(`@tessera/client: ${what}`, error);
};
const callbackFailed = logFailure('onSessionChange failed');

const pairOf = (tokens: TokenPair, receivedAt: number): TokenSet => ({
  accessToken: tokens.accessToken,
  refreshToken: tokens.refreshToken,
  expiresIn: tokens.expiresIn,
  refreshExpiresIn: tokens.refreshExpiresIn,
  receivedAt,
});

/** Holds the tokens in `storage`, refreshes them, and keeps the clients sharing them in step. */
export function createTokenKeeper({
  storage,
  name,
  contextLocal = false,
  now,
  exchange,
  onChange,
}: TokenKeeperOptions): TokenKeeper {
  let inflight: Promise<TokenSet | null> | null = null;
  /** A rotation's end: the tokens to go on with, or the server's refusal that ended the session. */
  type Rotation = { tokens: TokenSet | null } | { refused: TesseraError };
  // The refresh token last reported to onChange (null: signed out), so that a change seen twice, in
  // the shared storage and in a message, is reported once. It starts as what the storage holds: a
  // client created after a sign-in (a page reloaded, a new tab) hears when another tab signs out.
  let reported: string | null | undefined;
  const started = (async () => storage.get())().then(
    (tokens) => {
      if (reported === undefined) reported = tokens?.refreshToken ?? null;
    },
    () => undefined,
  );

  function report(tokens: TokenSet | null) {
    const key = tokens?.refreshToken ?? null;
    if (key === reported) return;
    reported = key;
    // The application's callback failing must not fail the refresh that every pending call awaits.
    try {
      // An async callback's rejection too, which nothing else awaits.
      const done: unknown = onChange?.(tokens);
      if (done) Promise.resolve(done).catch(callbackFailed);
    } catch (error) {
      callbackFailed(error);
    }
  }

  async function adopt(message: TabMessage) {
    await started;
    const stored = await storage.get();
    if (message.type === 'refreshed') {
      if (stored?.refreshToken === message.from) await storage.set(message.tokens);
      if (stored?.refreshToken === message.from || stored?.refreshToken === message.tokens.refreshToken)
        report(message.tokens);
    } else {
      if (stored?.refreshToken === message.refreshToken) await storage.clear();
      if (
        stored?.refreshToken === message.refreshToken ||
        (stored === null && reported === message.refreshToken)
      )
        report(null);
    }
  }

  const adoptFailed = logFailure("the storage failed while taking another tab's tokens");
  const tab = crossTab(
    name,
    contextLocal
      ? undefined
      : (message) => {
          adopt(message).catch(adoptFailed);
        },
  );
  // What another tab stored (a sign-in, a sign-out): the storage event tells it, messages may not.
  const unwatch = storage.watch?.((tokens) => report(tokens));

  async function rotate(basis: TokenSet): Promise<Rotation> {
    const stored = await storage.get();
    // Signed out meanwhile, or another call or tab already rotated this refresh token: take what it left.
    if (stored?.refreshToken !== basis.refreshToken) return { tokens: stored };
    const receivedAt = now();
    let pair: TokenPair;
    try {
      pair = await exchange(basis.refreshToken);
    } catch (error) {
      // Only the gateway's own 401 ends the session: a proxy's or a firewall's page (not an
      // envelope) says nothing of it.
      if (!isRefusal(error)) throw error;
      const current = await storage.get();
      if (current?.refreshToken !== basis.refreshToken) return { tokens: current };
      await storage.clear();
      tab.announce({ type: 'signed-out', refreshToken: basis.refreshToken });
      return { refused: error };
    }
    const tokens = pairOf(pair, receivedAt);
    const current = await storage.get();
    // A sign-out or a new sign-in while the request was out wins over this refresh.
    if (current?.refreshToken !== basis.refreshToken && current?.refreshToken !== tokens.refreshToken)
      return { tokens: current };
    await storage.set(tokens);
    tab.announce({ type: 'refreshed', from: basis.refreshToken, tokens });
    return { tokens };
  }

  function refresh(basis: TokenSet): Promise<TokenSet | null> {
    inflight ??= tab
      .exclusive(() => rotate(basis))
      .then((rotation) => {
        // Reported outside the lock: the application's callback may call the client.
        if ('refused' in rotation) {
          report(null);
          throw rotation.refused;
        }
        report(rotation.tokens);
        return rotation.tokens;
      })
      .finally(() => {
        inflight = null;
      });
    return inflight;
  }

  return {
    current: async () => storage.get(),
    async fresh() {
      const tokens = await storage.get();
      if (tokens === null || !isExpiring(tokens, now())) return tokens;
      return refresh(tokens);
    },
    refresh,
    async signIn(pair, receivedAt) {
      const tokens = pairOf(pair, receivedAt);
      await storage.set(tokens);
      report(tokens);
      return tokens;
    },
    async signOut() {
      const stored = await storage.get();
      await storage.clear();
      if (stored) tab.announce({ type: 'signed-out', refreshToken: stored.refreshToken });
      report(null);
    },
    close() {
      unwatch?.();
      tab.close();
    },
  };
}
