import { isRefusal, notSignedIn, TesseraError } from './errors.ts';
import { sessionIdOf } from './jwt.ts';
import { walkPages } from './pagination.ts';
import { atMost, type Call, type Fetch, send, settledWithin, type Transport } from './request.ts';
import { guarded, isContextLocal, memoryStorage, type TokenSet, type TokenStorage } from './storage.ts';
import { createTokenKeeper } from './tokens.ts';
import type {
  EndSessionResult,
  LoginResult,
  LogoutResult,
  Page,
  PageQuery,
  Registration,
  RevokeTokenResult,
  SecurityEvent,
  SendCodeResult,
  Session,
  SignupDetails,
  TokenPair,
  User,
  UserPatch,
} from './types.ts';

export interface ClientOptions {
  /** Where the gateway is, without `/api/v1`: `https://auth.example.com`. */
  baseUrl: string;
  /** Where the tokens are kept; `memoryStorage()` when absent. */
  storage?: TokenStorage;
  /** A WHATWG fetch; the global one when absent. */
  fetch?: Fetch;
  /**
   * Called with the new tokens on sign-in and on every refresh, and with null on sign-out. What it
   * throws, or its promise rejects with, is logged with `console.error` and fails nothing.
   */
  onSessionChange?: (tokens: TokenSet | null) => void;
  /** Milliseconds since the epoch (`Date.now`); tests move it to expire tokens. */
  now?: () => number;
  /**
   * Milliseconds a call may wait for each request it makes, and for a refresh of the tokens it
   * needs, before it fails as a network error (status 0); 30 s when absent, 0 waits for ever. A
   * refresh a call gave up on goes on, and its answer is kept.
   */
  timeout?: number;
}

/** Every item of a paginated route; `limit` per request, 100 (the most the server allows) when absent. */
export interface WalkOptions {
  limit?: number;
}

/** The Tessera API as typed methods. Success returns the envelope's `data`; every failure throws a TesseraError. */
export interface TesseraClient {
  auth: {
    /** Emails a sign-in code; `code` comes back in development and test only. */
    sendCode(email: string): Promise<SendCodeResult>;
    /** Signs in with the emailed code (spaces around it are dropped) and keeps the tokens. */
    verifyCode(email: string, code: string, extra?: SignupDetails): Promise<LoginResult>;
    /** Refreshes the tokens now (calls do it by themselves when needed); a 401 when the session has ended. */
    refresh(): Promise<TokenSet>;
    /** Ends the session of `refreshToken` (this client's own or another of the user's); signs out here if it is ours. */
    revokeToken(refreshToken: string): Promise<RevokeTokenResult>;
    /**
     * Ends every session of the user, then forgets the tokens here. A failure other than 401 keeps them
     * (to try again, or to `signOutLocally()`).
     */
    logout(): Promise<LogoutResult>;
  };
  sessions: {
    /** One page of the user's active sessions, newest first. */
    list(query?: PageQuery): Promise<Page<Session>>;
    /**
     * Every active session, page after page, each `_id` once. Pages are read by offset as the walk
     * goes: ending sessions during it skips some, so collect the list first (or `auth.logout()`).
     */
    all(options?: WalkOptions): AsyncGenerator<Session, void, undefined>;
    /** Ends one session ("sign out that device"); ending this client's own signs it out here too. */
    end(id: string): Promise<EndSessionResult>;
  };
  users: {
    me(): Promise<User>;
    /** A partial update: an absent field is left alone, `null` clears an optional one. */
    update(patch: UserPatch): Promise<User>;
    /** What the client must still show before the registration is complete. */
    registration(): Promise<Registration>;
    /** Schedules the account's deletion after the grace period; signing in and cancelling keeps the account. */
    requestDeletion(): Promise<User>;
    cancelDeletion(): Promise<User>;
  };
  securityEvents: {
    /** One page of the user's security events, newest first. */
    list(query?: PageQuery): Promise<Page<SecurityEvent>>;
    /** Every security event, page after page, each `_id` once. */
    all(options?: WalkOptions): AsyncGenerator<SecurityEvent, void, undefined>;
  };
  /** An access token that is not about to expire (refreshed if needed), to call other services with; null when signed out. */
  accessToken(): Promise<string | null>;
  /** Whether this client holds tokens (the server may still refuse them: the next call tells). */
  isSignedIn(): Promise<boolean>;
  /** Forgets the tokens here without telling the server; the session lives on until it expires or is revoked. */
  signOutLocally(): Promise<void>;
  /**
   * Stops listening to other tabs (the client still works, on its own). A server dropping a client
   * must call it unless the client is on a `memoryStorage()`, which listens to nothing.
   */
  close(): void;
}

const WALK_LIMIT = 100;

/**
 * A refresh with no answer after this long is asked again beside the first: both reach the server
 * within its REFRESH_REUSE_GRACE (10 s by default), which answers them the same pair.
 */
const REFRESH_AGAIN_AFTER_MS = 5_000;

/** How long an attempt of a refresh waits for its answer: a minute (the usual proxies' own limit), or `timeout` if longer. */
const refreshTimeout = (timeout: number) =>
  Number.isFinite(timeout) && timeout > 0 ? Math.max(timeout, 60_000) : 0;

/** Whether a refresh got no answer of the gateway's: none at all, or a proxy's page instead. */
const unanswered = (error: unknown) => error instanceof TesseraError && error.isNetworkError;

/**
 * The first of `attempts` to succeed, or the first refusal of the token (the others would not fare
 * better); when none does either, the error of the last to fail. Another error (a 429, a 503, no
 * answer) waits for the others: one of them may still bring the pair of a rotation already made.
 */
function firstAnswer<T>(attempts: Promise<T>[]): Promise<T> {
  return new Promise((resolve, reject) => {
    let left = attempts.length;
    for (const attempt of attempts)
      attempt.then(resolve, (error: unknown) => {
        left -= 1;
        if (left === 0 || isRefusal(error)) reject(error);
      });
  });
}

/** A client of the gateway at `baseUrl`; see the package README. */
export function createClient({
  baseUrl,
  storage = memoryStorage(),
  fetch = defaultFetch(),
  onSessionChange,
  now = Date.now,
  timeout = 30_000,
}: ClientOptions): TesseraClient {
  const transport: Transport = { baseUrl: baseUrl.replace(/\/+$/, ''), fetch, now, timeout };
  const tokens = createTokenKeeper({
    storage: guarded(storage),
    name: `tessera-client:${transport.baseUrl}:${storage.key}`,
    contextLocal: isContextLocal(storage),
    now,
    onChange: onSessionChange,
    // The server may have rotated the token already when its answer is lost (a dropped connection,
    // a proxy's error page): asked again with the same token within the reuse grace, it answers
    // the same pair, where a later call would present a spent token and end the session. The first
    // attempt goes on meanwhile, and the first answer wins: a slow answer is not thrown away. The
    // other is then aborted, so that it holds no connection, nor a process that has finished.
    async exchange(refreshToken) {
      let stop = () => {};
      const stopped = new Promise<void>((resolve) => {
        stop = resolve;
      });
      const attempt = () =>
        send<TokenPair>(
          { ...transport, timeout: refreshTimeout(timeout) },
          { method: 'POST', path: '/api/v1/auth/refresh-token', body: { refreshToken } },
          stopped,
        );
      const first = attempt();
      const early = await settledWithin(first, REFRESH_AGAIN_AFTER_MS);
      if (early && 'value' in early) return early.value;
      if (early && !unanswered(early.error)) throw early.error;
      try {
        return await firstAnswer(early ? [attempt()] : [first, attempt()]);
      } finally {
        stop();
      }
    },
  });

  /**
   * A call with the access token: refreshed first when about to expire, and once more on a 401. A
   * call given as a function is made from the tokens it is sent with, which a refresh may have rotated.
   */
  async function authorized<Data>(call: Call | ((held: TokenSet) => Call)): Promise<Data> {
    const sent = (held: TokenSet) =>
      send<Data>(transport, {
        ...(typeof call === 'function' ? call(held) : call),
        accessToken: held.accessToken,
      });
    const held = await atMost(timeout, tokens.fresh());
    if (held === null) throw notSignedIn();
    try {
      return await sent(held);
    } catch (error) {
      if (!(error instanceof TesseraError) || error.status !== 401) throw error;
      const renewed = await atMost(timeout, tokens.refresh(held));
      if (renewed === null) throw error;
      return sent(renewed);
    }
  }

  const page = <Item>(path: string, { page, limit }: PageQuery = {}) =>
    authorized<Page<Item>>({ method: 'GET', path, query: { page, limit } });

  /** Signs this client out when `ended` is the session of its tokens. */
  async function forgetIf(ended: (held: TokenSet) => boolean) {
    const held = await tokens.current();
    if (held !== null && ended(held)) await tokens.signOut();
  }

  return {
    auth: {
      sendCode: (email) =>
        send<SendCodeResult>(transport, {
          method: 'POST',
          path: '/api/v1/auth/send-otp-email',
          body: { email },
        }),

      async verifyCode(email, code, extra = {}) {
        const receivedAt = now();
        const result = await send<LoginResult>(transport, {
          method: 'POST',
          path: '/api/v1/auth/verify-otp-email',
          // A pasted code often carries spaces; the server trims the email but not the code.
          body: { ...extra, email, code: typeof code === 'string' ? code.trim() : code },
        });
        try {
          await tokens.signIn(result, receivedAt);
        } catch (error) {
          // The storage refused the tokens (no localStorage in server-side rendering, a full quota):
          // end the session nobody can use rather than leave it on the user's devices list.
          await send(transport, {
            method: 'POST',
            path: '/api/v1/auth/revoke-token',
            body: { refreshToken: result.refreshToken },
            accessToken: result.accessToken,
          }).catch(() => undefined);
          throw error;
        }
        return result;
      },

      async refresh() {
        const held = await tokens.current();
        if (held === null) throw notSignedIn();
        const renewed = await atMost(timeout, tokens.refresh(held));
        if (renewed === null) throw notSignedIn();
        return renewed;
      },

      async revokeToken(refreshToken) {
        // Our own token is rotated when the call refreshes first (an expiring access token, a 401):
        // revoke what we hold when the request goes, not the spent token (which ends the same session,
        // but earlier gateways answer 409).
        // Only while what we hold is still that session: another tab may have signed in anew since.
        const current = await tokens.current();
        const own = current?.refreshToken === refreshToken ? sessionIdOf(current.accessToken) : undefined;
        const result = await authorized<RevokeTokenResult>((held) => ({
          method: 'POST',
          path: '/api/v1/auth/revoke-token',
          body: {
            refreshToken:
              own !== undefined && sessionIdOf(held.accessToken) === own ? held.refreshToken : refreshToken,
          },
        }));
        await forgetIf((held) => sessionIdOf(held.accessToken) === result._id);
        return result;
      },

      async logout() {
        try {
          const result = await authorized<LogoutResult>({ method: 'POST', path: '/api/v1/auth/logout' });
          await tokens.signOut();
          return result;
        } catch (error) {
          // The gateway's 401: the sessions had ended. Not a proxy's page, which says nothing of them.
          if (isRefusal(error)) await tokens.signOut();
          throw error;
        }
      },
    },

    sessions: {
      list: (query) => page<Session>('/api/v1/auth/sessions', query),
      all: ({ limit = WALK_LIMIT } = {}) =>
        walkPages((number) => page<Session>('/api/v1/auth/sessions', { page: number, limit })),
      async end(id) {
        const result = await authorized<EndSessionResult>({
          method: 'DELETE',
          path: `/api/v1/auth/sessions/${encodeURIComponent(id)}`,
        });
        await forgetIf((held) => sessionIdOf(held.accessToken) === id);
        return result;
      },
    },

    users: {
      me: () => authorized<User>({ method: 'GET', path: '/api/v1/users/me' }),
      update: (patch) => authorized<User>({ method: 'PATCH', path: '/api/v1/users/me', body: patch }),
      registration: () => authorized<Registration>({ method: 'GET', path: '/api/v1/users/me/registration' }),
      requestDeletion: () => authorized<User>({ method: 'POST', path: '/api/v1/users/me/deletion' }),
      cancelDeletion: () => authorized<User>({ method: 'DELETE', path: '/api/v1/users/me/deletion' }),
    },

    securityEvents: {
      list: (query) => page<SecurityEvent>('/api/v1/users/me/security-events', query),
      all: ({ limit = WALK_LIMIT } = {}) =>
        walkPages((number) =>
          page<SecurityEvent>('/api/v1/users/me/security-events', { page: number, limit }),
        ),
    },

    async accessToken() {
      try {
        return (await atMost(timeout, tokens.fresh()))?.accessToken ?? null;
      } catch (error) {
        // Its refresh refused: the session is over, and this client signed out.
        if (isRefusal(error)) return null;
        throw error;
      }
    },
    async isSignedIn() {
      return (await tokens.current()) !== null;
    },
    signOutLocally: () => tokens.signOut(),
    close: () => tokens.close(),
  };
}

function defaultFetch(): Fetch {
  const global = (globalThis as { fetch?: Fetch }).fetch;
  if (!global) throw new Error('createClient: this runtime has no global fetch; pass one as `fetch`');
  // Called through globalThis: some browsers refuse a fetch detached from window ("Illegal invocation").
  return (url, init) => global.call(globalThis, url, init);
}
