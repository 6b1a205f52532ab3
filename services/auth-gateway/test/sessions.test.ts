import { DependencyUnavailableError } from '@tessera/contracts';
import { createSigner } from 'fast-jwt';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createSecurityLog } from '../src/modules/security-events/security-events.ts';
import { createActiveSessionStore } from '../src/modules/sessions/active-sessions.store.ts';
import { verifyCaller } from '../src/modules/sessions/authenticate.ts';
import { createSessions } from '../src/modules/sessions/sessions.ts';
import { signingKeyFromPem } from '../src/modules/tokens/keys.ts';
import { successorSealer } from '../src/modules/tokens/refresh-token.ts';
import { createTokenService } from '../src/modules/tokens/tokens.service.ts';
import { upsertOnSignIn } from '../src/modules/users/users.repository.ts';
import {
  bearer,
  body,
  claimsOf,
  manualClock,
  post,
  sidOf,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

const REVOKE = '/api/v1/auth/revoke-token';
const LOGOUT = '/api/v1/auth/logout';
const SESSIONS = '/api/v1/auth/sessions';

const clock = manualClock();
let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway({}, { clock });
});
afterAll(() => gateway.close());

const list = (accessToken: string, query = '') =>
  gateway.app.inject({ method: 'GET', url: `${SESSIONS}${query}`, headers: bearer(accessToken) });

describe('POST /api/v1/auth/revoke-token', () => {
  it('ends the session of the token: 200 with its id, then its tokens get 401 on the next request', async () => {
    const session = await signIn(gateway.app, 'amy@example.com');
    const other = await signIn(gateway.app, 'amy@example.com');
    const response = await post(
      gateway.app,
      REVOKE,
      { refreshToken: session.refreshToken },
      bearer(other.accessToken),
    );
    expect(response.statusCode).toBe(200);
    expect(body(response).data).toEqual({
      _id: sidOf(session.accessToken),
      revokedAt: clock.now().toISOString(),
    });

    expect((await list(session.accessToken)).statusCode).toBe(401);
    expect(
      (await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: session.refreshToken }))
        .statusCode,
    ).toBe(401);
    expect((await list(other.accessToken)).statusCode).toBe(200);
  });

  it('ends the session of a token rotated away: a client whose refresh answer was lost signs out with what it holds', async () => {
    const session = await signIn(gateway.app, 'bea@example.com');
    const keeper = await signIn(gateway.app, 'bea@example.com');
    const rotated = session.refreshToken;
    // The rotation's answer never reached the client: the successor lives on the server only.
    const lost = body(await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: rotated })).data;

    const revoked = await post(gateway.app, REVOKE, { refreshToken: rotated }, bearer(keeper.accessToken));

    expect(revoked.statusCode).toBe(200);
    expect(body(revoked).data._id).toBe(sidOf(session.accessToken));
    expect(
      (await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: lost.refreshToken })).statusCode,
    ).toBe(401);
    expect((await list(lost.accessToken)).statusCode).toBe(401);
    expect((await list(keeper.accessToken)).statusCode).toBe(200);
  });

  it('answers 409 for a token whose session has ended', async () => {
    const keeper = await signIn(gateway.app, 'ben@example.com');
    const next = await signIn(gateway.app, 'ben@example.com');
    expect(
      (await post(gateway.app, REVOKE, { refreshToken: next.refreshToken }, bearer(keeper.accessToken)))
        .statusCode,
    ).toBe(200);
    const again = await post(
      gateway.app,
      REVOKE,
      { refreshToken: next.refreshToken },
      bearer(keeper.accessToken),
    );
    expect(again.statusCode).toBe(409);
    expect(body(again).errors[0]).toBe('Resource already exists or cannot be changed in its current state');
  });

  it("answers 403 for another user's token, 404 for an unknown one, 400 without one and 401 without a bearer", async () => {
    const mine = await signIn(gateway.app, 'cleo@example.com');
    const theirs = await signIn(gateway.app, 'dan@example.com');
    const forbidden = await post(
      gateway.app,
      REVOKE,
      { refreshToken: theirs.refreshToken },
      bearer(mine.accessToken),
    );
    expect(forbidden.statusCode).toBe(403);
    expect(body(forbidden).errors[0]).toBe('Insufficient permissions');
    expect((await list(theirs.accessToken)).statusCode).toBe(200);
    // Their session is still open where refresh looks: the token still rotates.
    const refreshed = await post(gateway.app, '/api/v1/auth/refresh-token', {
      refreshToken: theirs.refreshToken,
    });
    expect(refreshed.statusCode).toBe(200);

    const unknown = await post(
      gateway.app,
      REVOKE,
      { refreshToken: 'y'.repeat(43) },
      bearer(mine.accessToken),
    );
    expect(unknown.statusCode).toBe(404);
    expect((await post(gateway.app, REVOKE, {}, bearer(mine.accessToken))).statusCode).toBe(400);

    const anonymous = await post(gateway.app, REVOKE, { refreshToken: mine.refreshToken });
    expect(anonymous.statusCode).toBe(401);
    expect(body(anonymous).errors[0]).toBe('Authentication required');
    expect(
      (await post(gateway.app, REVOKE, { refreshToken: mine.refreshToken }, { authorization: 'Basic abc' }))
        .statusCode,
    ).toBe(401);
  });
});

describe('POST /api/v1/auth/logout', () => {
  it('ends every session of the user and only theirs', async () => {
    const sessions = [
      await signIn(gateway.app, 'eve@example.com'),
      await signIn(gateway.app, 'eve@example.com'),
      await signIn(gateway.app, 'eve@example.com'),
    ];
    const bystander = await signIn(gateway.app, 'fay@example.com');
    // An empty JSON body with its content type is accepted, as clients often send one.
    const response = await gateway.app.inject({
      method: 'POST',
      url: LOGOUT,
      headers: { ...bearer(sessions[0]?.accessToken ?? ''), 'content-type': 'application/json' },
    });
    expect(response.statusCode).toBe(200);
    expect(body(response).data).toEqual({ revokedSessions: 3 });
    for (const session of sessions) {
      expect((await list(session.accessToken)).statusCode).toBe(401);
      expect(
        (await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: session.refreshToken }))
          .statusCode,
      ).toBe(401);
    }
    expect((await list(bystander.accessToken)).statusCode).toBe(200);
    expect((await gateway.app.inject({ method: 'POST', url: LOGOUT, payload: {} })).statusCode).toBe(401);
  });

  it('lists and counts only the sessions that are active: an expired one is neither listed nor revoked', async () => {
    const ownClock = manualClock();
    const own = await startGateway(
      { REFRESH_TOKEN_TTL: '600', ACCESS_TOKEN_TTL: '300' },
      { clock: ownClock },
    );
    try {
      await signIn(own.app, 'gil@example.com');
      ownClock.advance(601);
      const current = await signIn(own.app, 'gil@example.com');

      // Expired, it is no longer listed as active either.
      const listed = await own.app.inject({
        url: `${SESSIONS}?limit=100`,
        headers: bearer(current.accessToken),
      });
      expect(body(listed).data.list.map((session: { _id: string }) => session._id)).toEqual([
        sidOf(current.accessToken),
      ]);

      const response = await post(own.app, LOGOUT, {}, bearer(current.accessToken));

      expect(body(response).data).toEqual({ revokedSessions: 1 });
      const ended = await own.app.db
        .selectFrom('sessions')
        .select('endReason')
        .where('endReason', '=', 'logout')
        .execute();
      expect(ended).toHaveLength(1);
    } finally {
      await own.close();
    }
  });
});

describe("the Redis keys of a user's many sessions", () => {
  it('all go when they end, a few hundred at a time', async () => {
    const store = createActiveSessionStore(gateway.app.redis);
    const ids = Array.from({ length: 600 }, () => crypto.randomUUID());
    const now = clock.now();
    const until = new Date(now.getTime() + 60_000);
    const user = crypto.randomUUID();
    await Promise.all(ids.map((id) => store.reserve(id, until, now)));
    expect(await Promise.all(ids.map((id) => store.assign(id, user, until, now)))).not.toContain(false);
    await store.remove(ids);
    const stillActive = await Promise.all(ids.map((id) => store.holder(id)));
    expect(stillActive.filter((holder) => holder !== null)).toEqual([]);
  });
});

/** The session operations of the test's gateway, with `activeSessions` in place of its store. */
function sessionsWith(activeSessions: ReturnType<typeof createActiveSessionStore>) {
  const { app, config } = gateway;
  return createSessions({
    db: app.db,
    activeSessions,
    tokens: createTokenService({
      signingKey: signingKeyFromPem(config.jwt.privateKey ?? ''),
      issuer: config.jwt.issuer,
      audience: config.jwt.audience,
      accessTokenTtl: config.jwt.accessTokenTtl,
      clock,
    }),
    securityLog: createSecurityLog(app.db, app.log),
    clock,
    log: app.log,
    accessTokenTtl: config.jwt.accessTokenTtl,
    refreshTokenTtl: config.sessions.refreshTokenTtl,
    refreshReuseGrace: config.sessions.refreshReuseGrace,
    successors: successorSealer(config.otp.secret),
  });
}

describe('a session past REFRESH_TOKEN_TTL since its sign-in', () => {
  const ownClock = manualClock();
  let own: TestGateway;
  beforeAll(async () => {
    own = await startGateway({ REFRESH_TOKEN_TTL: '600', ACCESS_TOKEN_TTL: '300' }, { clock: ownClock });
  });
  afterAll(() => own.close());
  const refresh = async (refreshToken: string) => {
    const answer = await post(own.app, '/api/v1/auth/refresh-token', { refreshToken });
    expect(answer.statusCode).toBe(200);
    return body(answer).data as { accessToken: string; refreshToken: string };
  };

  it('lives on while refreshed: listed, and ended by logout', async () => {
    const signedIn = await signIn(own.app, 'kept@example.com');
    ownClock.advance(400);
    const second = await refresh(signedIn.refreshToken);
    ownClock.advance(400);
    const third = await refresh(second.refreshToken);

    const listed = await own.app.inject({ url: SESSIONS, headers: bearer(third.accessToken) });
    expect(body(listed).data.pagination.totalItems).toBe(1);
    expect(body(await post(own.app, LOGOUT, {}, bearer(third.accessToken))).data).toEqual({
      revokedSessions: 1,
    });
    expect(
      (await post(own.app, '/api/v1/auth/refresh-token', { refreshToken: third.refreshToken })).statusCode,
    ).toBe(401);
  });

  it('expired without a refresh: its token answers 409 to revoke-token, and its id 409 to DELETE', async () => {
    const old = await signIn(own.app, 'lapsed@example.com');
    ownClock.advance(601);
    const current = await signIn(own.app, 'lapsed@example.com');
    const revoke = await post(
      own.app,
      REVOKE,
      { refreshToken: old.refreshToken },
      bearer(current.accessToken),
    );
    expect(revoke.statusCode).toBe(409);
    const end = await own.app.inject({
      method: 'DELETE',
      url: `${SESSIONS}/${sidOf(old.accessToken)}`,
      headers: bearer(current.accessToken),
    });
    expect(end.statusCode).toBe(409);
  });
});

describe('a refresh of a revoked session', () => {
  it('neither extends the session nor stores a successor', async () => {
    const session = await signIn(gateway.app, 'revoked-then@example.com');
    const sid = sidOf(session.accessToken);
    expect(
      (await post(gateway.app, REVOKE, { refreshToken: session.refreshToken }, bearer(session.accessToken)))
        .statusCode,
    ).toBe(200);
    const rowOf = () =>
      gateway.app.db
        .selectFrom('sessions')
        .select('expiresAt')
        .where('id', '=', sid)
        .executeTakeFirstOrThrow();
    const before = await rowOf();
    clock.advance(60);

    expect(
      (await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: session.refreshToken }))
        .statusCode,
    ).toBe(401);
    expect(await rowOf()).toEqual(before);
    const tokens = await gateway.app.db
      .selectFrom('refreshTokens')
      .select('tokenHash')
      .where('sessionId', '=', sid)
      .execute();
    expect(tokens).toHaveLength(1);
  });
});

describe('a refresh racing a logout', () => {
  it('does not bring back the session the logout ended after the refresh had rotated its token', async () => {
    const { refreshToken, accessToken } = await signIn(gateway.app, 'zoe@example.com');
    const store = createActiveSessionStore(gateway.app.redis);
    // The interleaving: the rotation commits, then the logout ends the session and deletes its key,
    // then the refresh moves the key's expiry.
    let loggedOut = false;
    const sessions = sessionsWith({
      ...store,
      async assign(sessionId, userId, expiresAt, now) {
        loggedOut = (await post(gateway.app, LOGOUT, {}, bearer(accessToken))).statusCode === 200;
        return store.assign(sessionId, userId, expiresAt, now);
      },
    });

    const refreshed = sessions.refresh(refreshToken, { ipAddress: '127.0.0.1', userAgent: null });

    await expect(refreshed).rejects.toMatchObject({ statusCode: 401 });
    expect(loggedOut).toBe(true);
    expect((await list(accessToken)).statusCode).toBe(401);
    expect(await store.holder(sidOf(accessToken))).toBeNull();
  });
});

describe('a sign-in whose session key Redis could not finish', () => {
  it('still answers its pair: the access token works after the first refresh', async () => {
    // Redis went away between the key's reservation and the statement's end: the code is spent and
    // the session recorded, so the client gets its pair rather than a 503 and a code to ask again.
    const store = createActiveSessionStore(gateway.app.redis);
    const sessions = sessionsWith({
      ...store,
      assign: () => Promise.reject(new DependencyUnavailableError('redis', new Error('connection lost'))),
    });
    const client = { ipAddress: '127.0.0.1', userAgent: null };
    const started = await sessions.start(client, upsertOnSignIn('yuri@example.com', clock.now()));
    if (!started) throw new Error('no session started');
    const { tokens } = started;

    expect((await list(tokens.accessToken)).statusCode).toBe(401);
    const refreshed = await post(gateway.app, '/api/v1/auth/refresh-token', {
      refreshToken: tokens.refreshToken,
    });
    expect(refreshed.statusCode).toBe(200);
    expect((await list(body(refreshed).data.accessToken)).statusCode).toBe(200);
  });
});

describe('GET /api/v1/auth/sessions', () => {
  let tokens: Awaited<ReturnType<typeof signIn>>[];
  beforeAll(async () => {
    tokens = [];
    for (let i = 0; i < 25; i++) {
      tokens.push(await signIn(gateway.app, 'gus@example.com', { 'user-agent': `device-${i}` }));
      if (i % 2 === 0) clock.advance(1); // some sessions share a creation time: the id breaks the tie
    }
  });
  const caller = () => tokens[24]?.accessToken ?? '';

  it('paginates exactly: totals, flags, and a page past the end', async () => {
    const pages = await Promise.all([1, 2, 3, 4].map((page) => list(caller(), `?page=${page}&limit=10`)));
    const meta = pages.map((p) => body(p).data.pagination);
    expect(meta[0]).toEqual({
      currentPage: 1,
      totalPages: 3,
      totalItems: 25,
      itemsPerPage: 10,
      hasNextPage: true,
      hasPrevPage: false,
    });
    expect(meta[1]).toEqual({
      currentPage: 2,
      totalPages: 3,
      totalItems: 25,
      itemsPerPage: 10,
      hasNextPage: true,
      hasPrevPage: true,
    });
    expect(meta[2]).toEqual({
      currentPage: 3,
      totalPages: 3,
      totalItems: 25,
      itemsPerPage: 10,
      hasNextPage: false,
      hasPrevPage: true,
    });
    expect(meta[3]).toEqual({
      currentPage: 4,
      totalPages: 3,
      totalItems: 25,
      itemsPerPage: 10,
      hasNextPage: false,
      hasPrevPage: true,
    });
    expect(pages.map((p) => body(p).data.list.length)).toEqual([10, 10, 5, 0]);
  });

  it('walks pages in a stable newest-first order without repeating or skipping', async () => {
    const walked: string[] = [];
    for (let page = 1; page <= 9; page++) {
      walked.push(
        ...body(await list(caller(), `?page=${page}&limit=3`)).data.list.map((s: { _id: string }) => s._id),
      );
    }
    const all = body(await list(caller(), '?limit=100')).data.list;
    expect(walked).toEqual(all.map((s: { _id: string }) => s._id));
    expect(new Set(walked).size).toBe(25);
    // device-23 and device-24 were created at the same instant; device-0 alone first.
    expect(new Set([all[0].userAgent, all[1].userAgent])).toEqual(new Set(['device-23', 'device-24']));
    expect(all[24].userAgent).toBe('device-0');
    const created = all.map((s: { createdAt: string }) => s.createdAt);
    expect([...created].sort().reverse()).toEqual(created);
  });

  it("lists each session with its fields and marks the caller's own as current", async () => {
    const { list: sessions } = body(await list(caller(), '?limit=100')).data;
    expect(sessions.filter((s: { current: boolean }) => s.current)).toHaveLength(1);
    const current = sessions.find((s: { current: boolean }) => s.current);
    expect(current).toEqual({
      _id: sidOf(caller()),
      createdAt: expect.any(String),
      lastUsedAt: expect.any(String),
      expiresAt: expect.any(String),
      ipAddress: '127.0.0.1',
      userAgent: 'device-24',
      current: true,
    });
  });

  it('keeps the first 512 characters of a User-Agent', async () => {
    const long = await signIn(gateway.app, 'long-agent@example.com', {
      'user-agent': `Agent/${'x'.repeat(2000)}`,
    });
    const [session] = body(await list(long.accessToken)).data.list;
    expect(session.userAgent).toBe(`Agent/${'x'.repeat(506)}`);
  });

  it('keeps no control characters of a User-Agent (invisible where it is shown)', async () => {
    const hidden = await signIn(gateway.app, 'hidden-agent@example.com', {
      'user-agent': 'Phone\u009b/1.0\u0085 (\u007fiOS\t)',
    });
    const [session] = body(await list(hidden.accessToken)).data.list;
    expect(session.userAgent).toBe('Phone/1.0 (iOS)');
  });

  it("reads a User-Agent's UTF-8 as its characters, without direction marks or line separators", async () => {
    // Node reads each byte of a header as one character; these are a client's UTF-8 bytes.
    const sent = Buffer.from('Ayşe\u2028Phone/1.0 😀 \u202etxt.exe', 'utf8').toString('latin1');
    const named = await signIn(gateway.app, 'utf8-agent@example.com', { 'user-agent': sent });
    const [session] = body(await list(named.accessToken)).data.list;
    expect(session.userAgent).toBe('AyşePhone/1.0 😀 txt.exe');
  });

  it('defaults to page 1 with 10 items', async () => {
    const { pagination, list: items } = body(await list(caller())).data;
    expect(items).toHaveLength(10);
    expect(pagination).toMatchObject({ currentPage: 1, itemsPerPage: 10 });
  });

  it('rejects page and limit out of bounds or not integers, naming the parameter', async () => {
    for (const [query, name] of [
      ['?page=0', 'page'],
      ['?page=abc', 'page'],
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=2.5', 'limit'],
      // Integers in decimal digits only: not read as 10, 2 and 2.
      ['?page=1e1', 'page'],
      ['?page=0x2', 'page'],
      ['?limit=%202', 'limit'],
      ['?page=1000000000000', 'page'],
    ]) {
      const response = await list(caller(), query);
      expect(response.statusCode, query).toBe(400);
      expect(body(response).errors[1], query).toMatch(new RegExp(`^querystring\\.${name} `));
    }
  });

  it('leaves out ended sessions', async () => {
    const ended = tokens[0]?.accessToken ?? '';
    await gateway.app.inject({
      method: 'DELETE',
      url: `${SESSIONS}/${sidOf(ended)}`,
      headers: bearer(caller()),
    });
    const { list: sessions, pagination } = body(await list(caller(), '?limit=100')).data;
    expect(pagination.totalItems).toBe(24);
    expect(sessions.map((s: { _id: string }) => s._id)).not.toContain(sidOf(ended));
  });
});

describe('DELETE /api/v1/auth/sessions/{id}', () => {
  it("ends one of the caller's sessions; the device it belonged to is signed out", async () => {
    const phone = await signIn(gateway.app, 'hal@example.com');
    const laptop = await signIn(gateway.app, 'hal@example.com');
    const response = await gateway.app.inject({
      method: 'DELETE',
      url: `${SESSIONS}/${sidOf(phone.accessToken)}`,
      headers: bearer(laptop.accessToken),
    });
    expect(response.statusCode).toBe(200);
    expect(body(response).data).toEqual({
      _id: sidOf(phone.accessToken),
      revokedAt: clock.now().toISOString(),
    });
    expect((await list(phone.accessToken)).statusCode).toBe(401);
    expect((await list(laptop.accessToken)).statusCode).toBe(200);

    const again = await gateway.app.inject({
      method: 'DELETE',
      url: `${SESSIONS}/${sidOf(phone.accessToken)}`,
      headers: bearer(laptop.accessToken),
    });
    expect(again.statusCode).toBe(409);
  });

  it("answers 404 alike for another user's session, an unknown id and a malformed one", async () => {
    const mine = await signIn(gateway.app, 'ida@example.com');
    const theirs = await signIn(gateway.app, 'jon@example.com');
    const end = (id: string) =>
      gateway.app.inject({ method: 'DELETE', url: `${SESSIONS}/${id}`, headers: bearer(mine.accessToken) });
    const ids = [sidOf(theirs.accessToken), '00000000-0000-4000-8000-000000000000', 'not-a-uuid'];
    const answers = await Promise.all([...ids, `urn:uuid:${ids[0]}`].map(end));
    expect(answers.map((a) => a.statusCode)).toEqual([404, 404, 404, 404]);
    expect(new Set(answers.map((a) => JSON.stringify(body(a).errors))).size).toBe(1);
    expect((await list(theirs.accessToken)).statusCode).toBe(200);
  });
});

describe('a session key an earlier gateway wrote', () => {
  it('is honoured for the user Postgres says is its own, and then holds that user: an upgrade refuses no access token', async () => {
    const session = await signIn(gateway.app, 'upgraded@example.com');
    const other = await signIn(gateway.app, 'bystander@example.com');
    const key = `${gateway.config.redis.keyPrefix}session:${sidOf(session.accessToken)}`;
    const inspector = new Redis(gateway.config.redis.url);
    try {
      // As gateways before 2026-11-28 wrote it.
      await inspector.set(key, '1', 'EX', 600);
      // A token signed with the gateway's key (a leaked one) naming that session for another user.
      const [header = '', payload = ''] = session.accessToken.split('.');
      const { kid } = JSON.parse(Buffer.from(header, 'base64url').toString());
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
      const forged = createSigner({ key: gateway.config.jwt.privateKey, algorithm: 'EdDSA', kid })({
        ...claims,
        sub: other.user._id,
      });
      expect((await list(forged)).statusCode).toBe(401);
      expect(await inspector.get(key)).toBe('1');

      expect((await list(session.accessToken)).statusCode).toBe(200);
      expect(await inspector.get(key)).toBe(session.user._id);

      // One whose session has ended (its delete lost): refused, and the key goes.
      const ended = await signIn(gateway.app, 'ended-upgraded@example.com');
      const endedKey = `${gateway.config.redis.keyPrefix}session:${sidOf(ended.accessToken)}`;
      await post(gateway.app, LOGOUT, {}, bearer(ended.accessToken));
      await inspector.set(endedKey, '1', 'EX', 600);
      expect((await list(ended.accessToken)).statusCode).toBe(401);
      expect(await inspector.exists(endedKey)).toBe(0);
    } finally {
      inspector.disconnect();
    }
  });

  it('stays deleted when a logout ends its session while authentication gives it its user', async () => {
    const session = await signIn(gateway.app, 'overtaken@example.com');
    const key = `${gateway.config.redis.keyPrefix}session:${sidOf(session.accessToken)}`;
    const inspector = new Redis(gateway.config.redis.url);
    try {
      await inspector.set(key, '1', 'EX', 600);
      const { jwt } = gateway.config;
      const tokens = createTokenService({
        signingKey: signingKeyFromPem(jwt.privateKey ?? ''),
        issuer: jwt.issuer,
        audience: jwt.audience,
        accessTokenTtl: jwt.accessTokenTtl,
        clock,
      });
      const store = createActiveSessionStore(gateway.app.redis);
      // Postgres has said the session is open; the logout ends it before the key is written.
      const verify = verifyCaller(
        tokens,
        {
          ...store,
          async assign(...args) {
            expect((await post(gateway.app, LOGOUT, {}, bearer(session.accessToken))).statusCode).toBe(200);
            return store.assign(...args);
          },
        },
        { db: gateway.app.db, clock },
      );
      await expect(verify(session.accessToken)).rejects.toMatchObject({ code: 'SESSION_ENDED' });
      expect(await inspector.exists(key)).toBe(0);
    } finally {
      inspector.disconnect();
    }
  });
});

describe('a revocation whose Redis delete was lost', () => {
  const sessionKey = (accessToken: string) =>
    `${gateway.config.redis.keyPrefix}session:${sidOf(accessToken)}`;

  it('is completed by retrying logout, revoke or sign-out', async () => {
    const inspector = new Redis(gateway.config.redis.url);
    try {
      // Puts the session's key back, as if the delete had failed after the database commit.
      const lose = async (accessToken: string) => {
        await inspector.set(sessionKey(accessToken), claimsOf(accessToken).sub, 'EX', 600);
        expect((await list(accessToken)).statusCode).toBe(200);
      };
      const a = await signIn(gateway.app, 'lia@example.com');
      await post(gateway.app, LOGOUT, {}, bearer(a.accessToken));
      await lose(a.accessToken);
      expect(body(await post(gateway.app, LOGOUT, {}, bearer(a.accessToken))).data).toEqual({
        revokedSessions: 0,
      });
      expect((await list(a.accessToken)).statusCode).toBe(401);

      const b = await signIn(gateway.app, 'lia@example.com');
      const keeper = await signIn(gateway.app, 'lia@example.com');
      const revoke = () =>
        post(gateway.app, REVOKE, { refreshToken: b.refreshToken }, bearer(keeper.accessToken));
      await revoke();
      await lose(b.accessToken);
      expect((await revoke()).statusCode).toBe(409);
      expect((await list(b.accessToken)).statusCode).toBe(401);

      const c = await signIn(gateway.app, 'lia@example.com');
      const end = () =>
        gateway.app.inject({
          method: 'DELETE',
          url: `${SESSIONS}/${sidOf(c.accessToken)}`,
          headers: bearer(keeper.accessToken),
        });
      await end();
      await lose(c.accessToken);
      expect((await end()).statusCode).toBe(409);
      expect((await list(c.accessToken)).statusCode).toBe(401);
    } finally {
      await inspector.quit();
    }
  });
});

describe('a session whose Redis key was lost (Redis lost its data)', () => {
  it('fails closed until a refresh, which lets the client back in', async () => {
    const inspector = new Redis(gateway.config.redis.url);
    try {
      const session = await signIn(gateway.app, 'ned@example.com');
      await inspector.del(`${gateway.config.redis.keyPrefix}session:${sidOf(session.accessToken)}`);
      expect((await list(session.accessToken)).statusCode).toBe(401);

      const refreshed = await post(gateway.app, '/api/v1/auth/refresh-token', {
        refreshToken: session.refreshToken,
      });
      expect(refreshed.statusCode).toBe(200);
      expect((await list(body(refreshed).data.accessToken)).statusCode).toBe(200);
    } finally {
      await inspector.quit();
    }
  });
});

describe('authenticating a request', () => {
  it('takes the Bearer scheme in any case and after any spaces, and refuses any other scheme or shape with 401', async () => {
    const { accessToken } = await signIn(gateway.app, 'case@example.com');
    const withHeader = (authorization: string) =>
      gateway.app.inject({ method: 'GET', url: SESSIONS, headers: { authorization } });
    for (const scheme of ['Bearer ', 'bearer ', 'BEARER ', 'Bearer  '])
      expect((await withHeader(`${scheme}${accessToken}`)).statusCode, scheme).toBe(200);
    for (const header of [
      `Basic ${accessToken}`,
      `Bearer\t${accessToken}`,
      accessToken,
      `Bearer ${accessToken}.x`,
    ])
      expect((await withHeader(header)).statusCode, header.slice(0, 12)).toBe(401);
  });

  it('costs one Redis command besides the rate limit, and no Postgres query', async () => {
    const probe = await startGateway();
    try {
      probe.app.get('/test/whoami', { onRequest: probe.app.authenticate }, async (request) => request.auth);
      const { accessToken, user } = await signIn(probe.app, 'kim@example.com');
      // With Postgres gone, only the Redis check stands between the token and the route.
      await probe.app.db.destroy();
      const commands = vi.spyOn(probe.app.redis, 'sendCommand');
      const response = await probe.app.inject({
        method: 'GET',
        url: '/test/whoami',
        headers: bearer(accessToken),
      });
      expect(response.statusCode).toBe(200);
      expect(response.json().data).toMatchObject({ sub: user._id, sid: sidOf(accessToken) });
      // The general rate limit's counter (a script), then the session check.
      expect(commands.mock.calls.map(([command]) => command.name)).toEqual(['evalsha', 'get']);
    } finally {
      await probe.close();
    }
  });
});
