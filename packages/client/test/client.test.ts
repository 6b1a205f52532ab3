import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { manualClock, startGateway, type TestGateway } from '../../../services/auth-gateway/test/helpers.ts';
import {
  type ClientOptions,
  createClient,
  type Fetch,
  localStorageStorage,
  memoryStorage,
  type TesseraClient,
  TesseraError,
  type TokenSet,
} from '../src/index.ts';

const REFRESH = 'POST /api/v1/auth/refresh-token';

/** The real global fetch, recording `METHOD /path` of every request. */
function countingFetch() {
  const requests: string[] = [];
  const fetch: Fetch = (url, init) => {
    requests.push(`${init.method} ${new URL(url).pathname}`);
    return globalThis.fetch(url, init);
  };
  return { fetch, count: (request: string) => requests.filter((sent) => sent === request).length };
}

const newEmail = () => `${randomUUID()}@example.com`;

async function signIn(client: TesseraClient, email: string) {
  const { code } = await client.auth.sendCode(email);
  if (code === undefined) throw new Error('APP_ENV=test returns the code');
  return client.auth.verifyCode(email, code);
}

/** The TesseraError a promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<TesseraError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(TesseraError);
  return error as TesseraError;
}

const clients: TesseraClient[] = [];
afterAll(() => {
  for (const client of clients) client.close();
});

async function listening(gateway: TestGateway): Promise<string> {
  await gateway.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(gateway.app.server.address() as AddressInfo).port}`;
}

describe('@tessera/client against the gateway', () => {
  const clock = manualClock();
  let gateway: TestGateway;
  let baseUrl: string;
  beforeAll(async () => {
    gateway = await startGateway({}, { clock });
    baseUrl = await listening(gateway);
  });
  afterAll(() => gateway.close());

  /** A client on the gateway's clock, recording what it reports to onSessionChange. */
  function client(options: Partial<ClientOptions> = {}) {
    const changes: Array<TokenSet | null> = [];
    const counting = countingFetch();
    const tessera = createClient({
      baseUrl,
      fetch: counting.fetch,
      now: () => clock.now().getTime(),
      onSessionChange: (tokens) => changes.push(tokens),
      ...options,
    });
    clients.push(tessera);
    return { tessera, changes, count: counting.count };
  }

  it('gives up waiting for a refresh after `timeout`, and keeps its answer, the only working token, when it comes', async () => {
    const storage = memoryStorage();
    const { tessera: signedIn } = client({ storage });
    const { refreshToken } = await signIn(signedIn, newEmail());
    // On the same tokens, a client whose calls time out sooner than its refresh reaches the server.
    const slowRefresh: Fetch = async (url, init) => {
      if (new URL(url).pathname === '/api/v1/auth/refresh-token')
        await new Promise((resolve) => setTimeout(resolve, 300));
      return globalThis.fetch(url, init);
    };
    const { tessera } = client({ storage, fetch: slowRefresh, timeout: 100 });

    expect(await failure(tessera.auth.refresh())).toMatchObject({ status: 0, isNetworkError: true });

    await vi.waitFor(async () => expect((await storage.get())?.refreshToken).not.toBe(refreshToken), {
      timeout: 5000,
    });
    expect(await signedIn.users.me()).toMatchObject({ email: expect.stringMatching(/@example\.com$/) });
  });

  it.each([
    ['lost on the way (no answer after 5 s)', () => new Promise<never>(() => {})],
    [
      "replaced by a proxy's error page",
      async () => ({ status: 502, headers: new Headers(), text: async () => '<h1>Bad gateway</h1>' }),
    ],
  ])(
    'asks again for a refresh whose answer was %s, and gets the same pair: the session lives on',
    async (_, instead) => {
      let answers = 0;
      const { fetch, count } = countingFetch();
      // The gateway rotates the token, and its answer does not come back.
      const losingFirstAnswer: Fetch = async (url, init) => {
        const answer = await fetch(url, init);
        if (new URL(url).pathname === '/api/v1/auth/refresh-token' && answers++ === 0) return instead();
        return answer;
      };
      const { tessera, changes } = client({ fetch: losingFirstAnswer });
      const signedIn = await signIn(tessera, newEmail());
      clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);

      expect((await tessera.users.me())._id).toBe(signedIn.user._id);
      expect(count(REFRESH)).toBe(2);
      expect(changes.at(-1)).not.toBeNull();
      const events = await tessera.securityEvents.list();
      expect(events.list.map((event) => event.type)).not.toContain('refresh_reuse');
    },
  );

  it("fails a call after `timeout` while its refresh is held, and keeps that refresh's answer when it comes", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    onTestFinished(() => release());
    const { fetch, count } = countingFetch();
    const heldRefresh: Fetch = async (url, init) => {
      if (new URL(url).pathname === '/api/v1/auth/refresh-token') await held;
      return fetch(url, init);
    };
    const storage = memoryStorage();
    const { tessera, changes } = client({ storage, fetch: heldRefresh, timeout: 200 });
    const signedIn = await signIn(tessera, newEmail());
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);

    const timedOut = await failure(tessera.users.me());
    expect(timedOut).toMatchObject({ status: 0, isNetworkError: true });
    expect(timedOut.messages).toEqual(['The server did not answer in time']);

    release();
    await vi.waitFor(() => expect(changes).toHaveLength(2), { timeout: 5000 });
    expect((await storage.get())?.refreshToken).not.toBe(signedIn.refreshToken);
    expect((await tessera.users.me())._id).toBe(signedIn.user._id);
    expect(count(REFRESH)).toBe(1);
  });

  it('signs in with the emailed code, keeps the tokens and reports them', async () => {
    const { tessera, changes } = client();
    const email = newEmail();

    const sent = await tessera.auth.sendCode(` ${email.toUpperCase()} `);
    expect(sent).toMatchObject({ email, expiresIn: 300, code: expect.stringMatching(/^\d{4}$/) });
    const login = await tessera.auth.verifyCode(email, sent.code ?? '', { signupSource: 'sdk-test' });

    expect(login.user).toMatchObject({ email, signupSource: 'sdk-test', roles: ['user'] });
    expect(login.isRegistrationComplete).toBe(false);
    expect(await tessera.isSignedIn()).toBe(true);
    expect(await tessera.accessToken()).toBe(login.accessToken);
    expect(changes).toEqual([
      {
        accessToken: login.accessToken,
        refreshToken: login.refreshToken,
        expiresIn: login.expiresIn,
        refreshExpiresIn: login.refreshExpiresIn,
        receivedAt: clock.now().getTime(),
      },
    ]);
  });

  it('reads the profile of the signed-in user with users.me()', async () => {
    const { tessera } = client();
    const login = await signIn(tessera, newEmail());

    const me = await tessera.users.me();

    expect(me).toEqual(login.user);
  });

  it('walks every session with sessions.all(), two to a page, each once', async () => {
    const email = newEmail();
    const { tessera, count } = client();
    for (let device = 0; device < 4; device += 1) {
      await signIn(client().tessera, email);
      clock.advance(1);
    }
    await signIn(tessera, email);

    const first = await tessera.sessions.list({ page: 1, limit: 2 });
    expect(first.pagination).toEqual({
      currentPage: 1,
      totalPages: 3,
      totalItems: 5,
      itemsPerPage: 2,
      hasNextPage: true,
      hasPrevPage: false,
    });
    const sessions = [];
    for await (const session of tessera.sessions.all({ limit: 2 })) sessions.push(session);

    expect(new Set(sessions.map((session) => session._id)).size).toBe(5);
    expect(sessions.filter((session) => session.current)).toHaveLength(1);
    expect(sessions[0]?.current).toBe(true);
    expect(count('GET /api/v1/auth/sessions')).toBe(1 + 3);
  });

  it.each([
    { locks: true, title: 'with Web Locks' },
    { locks: false, title: 'without Web Locks (React Native)' },
  ])('refreshes an expired access token once for ten concurrent calls, $title', async ({ locks }) => {
    if (!locks) vi.stubGlobal('navigator', {});
    onTestFinished(() => {
      vi.unstubAllGlobals();
    });
    const { tessera, changes, count } = client();
    const login = await signIn(tessera, newEmail());
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);

    const results = await Promise.all(Array.from({ length: 10 }, () => tessera.users.me()));

    expect(results.every((me) => me._id === login.user._id)).toBe(true);
    expect(count(REFRESH)).toBe(1);
    expect(count('GET /api/v1/users/me')).toBe(10);
    expect(changes).toHaveLength(2);
    expect(await tessera.accessToken()).toBe(changes[1]?.accessToken);
    expect(changes[1]?.accessToken).not.toBe(login.accessToken);
  });

  it('answers ten calls refused with 401 by one refresh and one retry each', async () => {
    // The gateway checks `exp` against the real time: a token signed two hours ago is refused, while
    // the client, whose clock stands at the sign-in, believes it valid.
    const signedAt = Date.now() - 2 * 3600 * 1000;
    clock.advance((signedAt - clock.now().getTime()) / 1000);
    const { tessera, count } = client({ now: () => signedAt });
    await signIn(tessera, newEmail());
    clock.advance((Date.now() - signedAt) / 1000);

    await Promise.all(Array.from({ length: 10 }, () => tessera.users.me()));

    expect(count(REFRESH)).toBe(1);
    expect(count('GET /api/v1/users/me')).toBe(20);
  });

  it('shares one refresh between two clients on one storage (two tabs on localStorage)', async () => {
    const storage = memoryStorage();
    const counting = countingFetch();
    const a = client({ storage, fetch: counting.fetch });
    const b = client({ storage, fetch: counting.fetch });
    await signIn(a.tessera, newEmail());
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);

    await Promise.all([a, b, a, b, a, b].map(({ tessera }) => tessera.users.me()));

    expect(counting.count(REFRESH)).toBe(1);
    expect(b.changes.map((tokens) => tokens?.accessToken)).toEqual([(await storage.get())?.accessToken]);
  });

  it("refreshes one user's tokens while another client's refresh is held (a server calling for many users)", async () => {
    // A client waits at most 10 s for a refresh that shares its lock, then refreshes anyway: made
    // endless here, so that waiting at all for an unrelated client's refresh hangs the test.
    const waitForEver = vi
      .spyOn(AbortSignal, 'timeout')
      .mockImplementation(() => new AbortController().signal);
    let releaseA = () => {};
    let aRefreshing = () => {};
    const aHeld = new Promise<void>((resolve) => {
      aRefreshing = resolve;
    });
    onTestFinished(() => {
      releaseA();
      waitForEver.mockRestore();
    });
    const holdingRefresh: Fetch = async (url, init) => {
      if (new URL(url).pathname === '/api/v1/auth/refresh-token') {
        aRefreshing();
        await new Promise<void>((resolve) => {
          releaseA = resolve;
        });
      }
      return globalThis.fetch(url, init);
    };
    // Each on its default memory storage: its tokens are its own, and so is its refresh.
    const a = client({ fetch: holdingRefresh });
    const b = client();
    const alice = await signIn(a.tessera, newEmail());
    const bob = await signIn(b.tessera, newEmail());
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);

    const aliceMe = a.tessera.users.me();
    await aHeld;

    expect((await b.tessera.users.me())._id).toBe(bob.user._id);
    expect(b.count(REFRESH)).toBe(1);
    releaseA();
    expect((await aliceMe)._id).toBe(alice.user._id);
  });

  it("revokeToken ends another device's session, or its own and signs out here, also when the call refreshes first", async () => {
    const email = newEmail();
    const { tessera, changes, count } = client();
    const login = await signIn(tessera, email);
    const elsewhere = await signIn(client().tessera, email);
    await tessera.auth.revokeToken(elsewhere.refreshToken);
    expect(await tessera.isSignedIn()).toBe(true);
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);

    const revoked = await tessera.auth.revokeToken(login.refreshToken);

    expect(count(REFRESH)).toBe(1);
    expect(await tessera.isSignedIn()).toBe(false);
    expect(changes.at(-1)).toBeNull();
    // The session is gone on the server: another device of the user sees only itself.
    const other = client().tessera;
    await signIn(other, email);
    const sessions = (await other.sessions.list()).list;
    expect(sessions.map((session) => session._id)).not.toContain(revoked._id);
    expect(sessions).toHaveLength(1);
  });

  it('signs in with a pasted code and email padded with spaces', async () => {
    const { tessera } = client();
    const email = newEmail();
    const { code } = await tessera.auth.sendCode(email);

    const login = await tessera.auth.verifyCode(` ${email.toUpperCase()} `, ` ${code ?? ''}\n`);

    expect(login.user.email).toBe(email);
    expect(await tessera.isSignedIn()).toBe(true);
  });

  it('fails verifyCode with a TesseraError when the storage cannot keep the tokens, leaving no session', async () => {
    // localStorageStorage where there is no localStorage: server-side rendering, Node.
    expect(globalThis.localStorage).toBeUndefined();
    const email = newEmail();
    const { tessera, changes } = client({ storage: localStorageStorage() });

    const refused = await failure(signIn(tessera, email));

    expect(refused).toMatchObject({ status: 0, isNetworkError: false, code: 'STORAGE_FAILED' });
    expect(refused.messages).toEqual(['The token storage failed']);
    expect(refused.cause).toMatchObject({ message: 'localStorageStorage: there is no localStorage here' });
    expect(await tessera.isSignedIn()).toBe(false);
    expect(changes).toEqual([]);
    const other = client().tessera;
    await signIn(other, email);
    expect((await other.sessions.list()).pagination.totalItems).toBe(1);
  });

  it('logs out: the next call fails with 401, and another device is signed out once its refresh is refused', async () => {
    const email = newEmail();
    const here = client();
    const there = client();
    await signIn(here.tessera, email);
    await signIn(there.tessera, email);

    expect(await here.tessera.auth.logout()).toEqual({ revokedSessions: 2 });
    expect(here.changes.at(-1)).toBeNull();
    expect(await here.tessera.isSignedIn()).toBe(false);
    expect((await failure(here.tessera.users.me())).status).toBe(401);

    const refused = await failure(there.tessera.users.me());
    expect(refused).toMatchObject({ status: 401, isNetworkError: false });
    expect(refused.messages[0]).toBe('Authentication required');
    expect(there.count(REFRESH)).toBe(1);
    expect(there.changes.at(-1)).toBeNull();
    expect(await there.tessera.isSignedIn()).toBe(false);
  });

  it("fails a call whose refresh the gateway refuses with the gateway's reason, and signs out", async () => {
    const email = newEmail();
    const here = client();
    const there = client();
    await signIn(here.tessera, email);
    await signIn(there.tessera, email);
    await here.tessera.auth.logout();

    // Its access token has expired: the call refreshes first, and the session is over.
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance + 1);
    const refused = await failure(there.tessera.users.me());
    expect(refused).toMatchObject({ status: 401, code: 'REFRESH_TOKEN_INVALID', isNetworkError: false });
    expect(there.count(REFRESH)).toBe(1);
    expect(there.changes.at(-1)).toBeNull();
    expect(await there.tessera.accessToken()).toBeNull();
    // Signed out now: the next call is refused unsent, as for a client that never signed in.
    expect(await failure(there.tessera.users.me())).toMatchObject({ status: 401, code: undefined });
    expect(there.count(REFRESH)).toBe(1);
  });

  it("keeps the tokens when a proxy's 401 page, not the gateway, answers the logout", async () => {
    const storage = memoryStorage();
    const { tessera: signedIn } = client({ storage });
    await signIn(signedIn, newEmail());
    // A proxy in the way answers every request with its own 401 page: the session is untouched.
    const proxied: Fetch = async () =>
      new Response('<h1>401 Authorization Required</h1>', {
        status: 401,
        headers: { 'content-type': 'text/html' },
      });
    const { tessera } = client({ storage, fetch: proxied });

    expect(await failure(tessera.auth.logout())).toMatchObject({ status: 401, isNetworkError: true });
    expect(await tessera.isSignedIn()).toBe(true);
    // Once past the proxy, the logout ends the session.
    expect(await signedIn.auth.logout()).toEqual({ revokedSessions: 1 });
  });

  it('signs out here when its own session ends by revokeToken or sessions.end, not when another does', async () => {
    const email = newEmail();
    const revoker = client();
    const ender = client();
    const revoked = await signIn(revoker.tessera, email);
    await signIn(ender.tessera, email);
    const bystander = client();
    await signIn(bystander.tessera, email);

    await revoker.tessera.auth.revokeToken(revoked.refreshToken);
    expect(await revoker.tessera.isSignedIn()).toBe(false);
    expect(revoker.changes.at(-1)).toBeNull();

    const own = (await ender.tessera.sessions.list()).list.find((session) => session.current);
    const other = (await ender.tessera.sessions.list()).list.find((session) => !session.current);
    await ender.tessera.sessions.end(other?._id ?? '');
    expect(await ender.tessera.isSignedIn()).toBe(true);
    await ender.tessera.sessions.end(own?._id ?? '');
    expect(await ender.tessera.isSignedIn()).toBe(false);
    expect(ender.changes.at(-1)).toBeNull();

    // The bystander's session was `other`: its next call is refused and it signs out.
    expect((await failure(bystander.tessera.users.me())).status).toBe(401);
    expect(bystander.changes.at(-1)).toBeNull();
  });

  it('updates the profile, reads the registration, schedules and cancels the deletion, lists the events', async () => {
    const { tessera } = client();
    await signIn(tessera, newEmail());

    expect(await tessera.users.update({ name: ' Ada ', surname: 'Lovelace' })).toMatchObject({
      name: 'Ada',
      surname: 'Lovelace',
    });
    const registration = await tessera.users.registration();
    expect(registration.isRegistrationComplete).toBe(false);
    expect(registration.missing).toEqual(['username', 'privacyPolicy', 'termsOfUse']);
    expect((await tessera.users.requestDeletion()).accountDeletionStatus).toBe('scheduled');
    expect((await tessera.users.cancelDeletion()).accountDeletionStatus).toBe('cancelled');

    const types = [];
    for await (const event of tessera.securityEvents.all({ limit: 1 })) types.push(event.type);
    expect(types).toEqual(expect.arrayContaining(['sign_in', 'profile_updated', 'deletion_requested']));
    expect((await tessera.securityEvents.list({ limit: 1 })).pagination.totalItems).toBe(types.length);
  });

  it('throws the envelope errors of a refused request as a TesseraError', async () => {
    const { tessera } = client();

    const invalid = await failure(tessera.auth.verifyCode(newEmail(), '12'));

    expect(invalid.status).toBe(400);
    expect(invalid.messages[0]).toBe('Validation failed');
    expect(invalid.messages.length).toBeGreaterThan(1);
    expect(invalid.code).toBe('VALIDATION_FAILED');
    expect(invalid.isNetworkError).toBe(false);
    expect(invalid.retryAfter).toBeUndefined();

    // Two refusals of verify that a client treats apart: a wrong code (type again), no code (ask again).
    const email = newEmail();
    expect(await failure(tessera.auth.verifyCode(email, '1234'))).toMatchObject({
      status: 404,
      code: 'OTP_NOT_FOUND',
    });
    const { code } = await tessera.auth.sendCode(email);
    const wrong = String((Number(code) + 1) % 10_000).padStart(4, '0');
    expect(await failure(tessera.auth.verifyCode(email, wrong))).toMatchObject({
      status: 400,
      code: 'OTP_INVALID',
    });
  });

  it('fails with 401 without asking the server when it holds no tokens', async () => {
    const { tessera, count } = client();

    expect(await failure(tessera.sessions.list())).toMatchObject({ status: 401 });
    expect(await tessera.accessToken()).toBeNull();
    expect(count('GET /api/v1/auth/sessions')).toBe(0);
  });
});

describe('@tessera/client when the gateway limits the caller', () => {
  let gateway: TestGateway;
  let baseUrl: string;
  beforeAll(async () => {
    gateway = await startGateway({ OTP_RESEND_COOLDOWN: '60' });
    baseUrl = await listening(gateway);
  });
  afterAll(() => gateway.close());

  it('reports Retry-After as retryAfter on a 429', async () => {
    const tessera = createClient({ baseUrl });
    clients.push(tessera);
    const email = newEmail();
    await tessera.auth.sendCode(email);

    const limited = await failure(tessera.auth.sendCode(email));

    expect(limited.status).toBe(429);
    expect(limited.messages[0]).toBe('Too many requests');
    expect(limited.retryAfter).toBeGreaterThan(0);
    expect(limited.retryAfter).toBeLessThanOrEqual(60);
    expect(limited.code).toBe('SEND_COOLDOWN');
    expect(limited.isNetworkError).toBe(false);
  });
});

describe('@tessera/client without an answer from the gateway', () => {
  it('is a network error when the server is gone', async () => {
    const server = http.createServer().listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    server.close();
    await once(server, 'close');
    const tessera = createClient({ baseUrl: `http://127.0.0.1:${port}` });
    clients.push(tessera);

    const unreachable = await failure(tessera.auth.sendCode(newEmail()));

    expect(unreachable).toMatchObject({
      status: 0,
      isNetworkError: true,
      code: undefined,
      retryAfter: undefined,
    });
    expect(unreachable.messages).toEqual(['The server could not be reached']);
    expect(unreachable.cause).toBeInstanceOf(Error);
  });

  it('gives up on a server that never answers after `timeout`, and closes the connection', async () => {
    // Headers sent, the body never ended: the timeout covers reading the body too.
    const stalled = http.createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }).write('{"isSuccess":');
    });
    stalled.listen(0, '127.0.0.1');
    await once(stalled, 'listening');
    const closed = new Promise((resolve) =>
      stalled.on('connection', (socket) => socket.on('close', resolve)),
    );
    try {
      const tessera = createClient({
        baseUrl: `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`,
        timeout: 200,
      });
      clients.push(tessera);

      const timedOut = await failure(tessera.auth.sendCode(newEmail()));

      expect(timedOut).toMatchObject({ status: 0, isNetworkError: true });
      expect(timedOut.messages).toEqual(['The server did not answer in time']);
      await closed;
    } finally {
      stalled.closeAllConnections();
      stalled.close();
    }
  });

  it('is a network error when the answer is not an envelope (a proxy page)', async () => {
    const proxy = http.createServer((_request, response) => {
      response
        .writeHead(502, { 'content-type': 'text/html', 'retry-after': '5' })
        .end('<h1>Bad gateway</h1>');
    });
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    try {
      const tessera = createClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` });
      clients.push(tessera);

      const garbled = await failure(tessera.auth.sendCode(newEmail()));

      expect(garbled).toMatchObject({ status: 502, isNetworkError: true, retryAfter: 5 });
    } finally {
      proxy.close();
    }
  });
});
