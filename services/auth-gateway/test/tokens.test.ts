import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPublicKey,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
  verify as verifySignature,
} from 'node:crypto';
import { createSigner } from 'fast-jwt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { successorSealer } from '../src/modules/tokens/refresh-token.ts';
import {
  ageRotations,
  bearer,
  body,
  manualClock,
  post,
  sidOf,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

const REFRESH = '/api/v1/auth/refresh-token';
const SESSIONS = '/api/v1/auth/sessions';

const clock = manualClock();
let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway({}, { clock });
});
afterAll(() => gateway.close());

const decode = (token: string) => {
  const [header = '', payload = ''] = token.split('.');
  return {
    header: JSON.parse(Buffer.from(header, 'base64url').toString()),
    payload: JSON.parse(Buffer.from(payload, 'base64url').toString()),
  };
};
// Changes the first signature character (the last one may only carry padding bits).
const tamperSignature = (token: string) => {
  const at = token.lastIndexOf('.') + 1;
  return `${token.slice(0, at)}${token[at] === 'A' ? 'B' : 'A'}${token.slice(at + 1)}`;
};
const refresh = (refreshToken: string) => post(gateway.app, REFRESH, { refreshToken });
const hashOf = (token: string) => createHash('sha256').update(token).digest();

/** The key gateways before 2026-11-27 sealed a rotated token's successor with: the token alone. */
const keyOfTokenAlone = (token: string) =>
  Buffer.from(hkdfSync('sha256', token, '', 'tessera refresh-token successor', 32));

/** `successor` sealed as those gateways did (their layout, behind `prefix`), under the key of `token` alone. */
function sealedWithTokenAlone(token: string, successor: string, prefix = Buffer.alloc(0)): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyOfTokenAlone(token), iv);
  const text = Buffer.concat([cipher.update(successor, 'utf8'), cipher.final()]);
  return Buffer.concat([prefix, iv, cipher.getAuthTag(), text]);
}

/** Stores `sealed` as the sealed successor of the rotated `token`, as a gateway writes it. */
const storeSeal = (token: string, sealed: Buffer) =>
  gateway.app.db
    .updateTable('refreshTokens')
    .set({ successorSealed: sealed })
    .where('tokenHash', '=', hashOf(token))
    .execute();
const listSessions = (accessToken: string) =>
  gateway.app.inject({ method: 'GET', url: SESSIONS, headers: bearer(accessToken) });

describe('access tokens', () => {
  it('are EdDSA JWTs with kid, iss, aud, sub, sid, roles, iat and exp, verifiable with the JWKS', async () => {
    const { accessToken, user } = await signIn(gateway.app, 'olivia@example.com');
    const { header, payload } = decode(accessToken);
    expect(header).toMatchObject({ alg: 'EdDSA', typ: 'JWT', kid: expect.any(String) });
    expect(payload).toMatchObject({ iss: 'tessera', aud: 'tessera', sub: user._id, roles: ['user'] });
    expect(payload.sid).toMatch(/^[0-9a-f-]{36}$/);
    expect(payload.exp - payload.iat).toBe(3600);

    const jwks = await gateway.app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    expect(jwks.statusCode).toBe(200);
    const { keys } = jwks.json();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid: header.kid, alg: 'EdDSA', use: 'sig' });
    expect(keys[0]).not.toHaveProperty('d');
    const [h, p, signature = ''] = accessToken.split('.');
    const key = createPublicKey({ key: keys[0], format: 'jwk' });
    expect(verifySignature(null, Buffer.from(`${h}.${p}`), key, Buffer.from(signature, 'base64url'))).toBe(
      true,
    );
  });

  it('are refused when unsigned, HMAC-signed, signed by another key, for another audience or with ids that are not UUIDs', async () => {
    const { accessToken } = await signIn(gateway.app, 'peggy@example.com');
    const { header, payload } = decode(accessToken);
    const jwk = (await gateway.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json().keys[0];
    const publicPem = createPublicKey({ key: jwk, format: 'jwk' })
      .export({ type: 'spki', format: 'pem' })
      .toString();
    const stranger = generateKeyPairSync('ed25519')
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    const claims = { ...payload };
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

    const signedByGateway = createSigner({
      key: gateway.config.jwt.privateKey,
      algorithm: 'EdDSA',
      kid: header.kid,
    });
    const forged = [
      `${b64({ alg: 'none', typ: 'JWT', kid: header.kid })}.${b64(claims)}.`,
      createSigner({ key: publicPem, algorithm: 'HS256', kid: header.kid })(claims),
      createSigner({ key: stranger, algorithm: 'EdDSA', kid: header.kid })(claims),
      createSigner({ key: stranger, algorithm: 'EdDSA', kid: 'unknown-kid' })(claims),
      tamperSignature(accessToken),
      ...['aud', 'iss'].map((claim) => {
        const { [claim]: _dropped, ...rest } = claims;
        return signedByGateway(rest);
      }),
      // The gateway's own key, but ids that are not Tessera's (no UUID): refused, not a 500.
      signedByGateway({ ...claims, sub: 'user-42' }),
      signedByGateway({ ...claims, sid: 42 }),
    ];
    for (const token of forged) {
      const response = await listSessions(token);
      expect(response.statusCode, token).toBe(401);
      expect(response.json().errors[0]).toBe('Authentication required');
    }
    expect((await listSessions(accessToken)).statusCode).toBe(200);
  });

  it("are refused, even signed with the gateway's key, when they name another user's session, or outlive ACCESS_TOKEN_TTL", async () => {
    // What a leaked signing key gives, until the key is rotated: tokens it signs, but none that a
    // victim's logout leaves standing or that outlast the rotation.
    const victim = await signIn(gateway.app, 'victor@example.com');
    const attacker = await signIn(gateway.app, 'mallory@example.com');
    const { header, payload } = decode(victim.accessToken);
    const sign = createSigner({ key: gateway.config.jwt.privateKey, algorithm: 'EdDSA', kid: header.kid });
    const now = Math.floor(clock.now().getTime() / 1000);
    const ttl = gateway.config.jwt.accessTokenTtl;
    const forged = {
      "another user's session": sign({ ...payload, sid: decode(attacker.accessToken).payload.sid }),
      'a lifetime of ten years': sign({ ...payload, iat: now, exp: now + 10 * 365 * 86_400 }),
      'issued in the future': sign({ ...payload, iat: now + 86_400, exp: now + 86_400 + ttl }),
    };
    for (const [what, token] of Object.entries(forged)) {
      expect(decode(token).header.kid, what).toBe(header.kid);
      expect((await listSessions(token)).statusCode, what).toBe(401);
    }
    // Signed as the gateway signs: accepted.
    expect((await listSessions(sign({ ...payload, iat: now, exp: now + ttl }))).statusCode).toBe(200);
  });

  it('expire after ACCESS_TOKEN_TTL, by the gateway clock', async () => {
    const { accessToken } = await signIn(gateway.app, 'quinn@example.com');
    const list = () => gateway.app.inject({ method: 'GET', url: SESSIONS, headers: bearer(accessToken) });
    // `iat` is in whole seconds: a second before the end, then a second after it.
    clock.advance(gateway.config.jwt.accessTokenTtl + gateway.config.jwt.clockTolerance - 1);
    expect((await list()).statusCode).toBe(200);
    clock.advance(2);
    const response = await list();
    expect(response.statusCode).toBe(401);
    expect(response.json().errors[0]).toBe('Authentication required');
  });

  it('can be ES256 when the configured key is P-256', async () => {
    const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    const es = await startGateway({ JWT_PRIVATE_KEY: pem });
    try {
      const { accessToken } = await signIn(es.app, 'rita@example.com');
      expect(decode(accessToken).header.alg).toBe('ES256');
      expect(
        (await es.app.inject({ method: 'GET', url: SESSIONS, headers: bearer(accessToken) })).statusCode,
      ).toBe(200);
      const jwks = (await es.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json();
      expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256' });
    } finally {
      await es.close();
    }
  });
});

describe('POST /api/v1/auth/refresh-token', () => {
  it('rotates: returns a new pair for the same session, and stores refresh tokens only as hashes', async () => {
    const first = await signIn(gateway.app, 'sybil@example.com');
    clock.advance(1);
    const response = await refresh(first.refreshToken);
    expect(response.statusCode).toBe(200);
    const next = body(response).data;
    expect(Object.keys(next).sort()).toEqual([
      'accessToken',
      'expiresIn',
      'refreshExpiresIn',
      'refreshToken',
    ]);
    expect(next.refreshToken).not.toBe(first.refreshToken);
    expect(decode(next.accessToken).payload.sid).toBe(decode(first.accessToken).payload.sid);
    expect((await listSessions(next.accessToken)).statusCode).toBe(200);

    const rows = await gateway.app.db.selectFrom('refreshTokens').selectAll().execute();
    const stored = JSON.stringify(rows);
    for (const token of [first.refreshToken, next.refreshToken]) {
      expect(stored).not.toContain(token);
      const hash = createHash('sha256').update(token).digest();
      expect(rows.some((row) => row.tokenHash.equals(hash))).toBe(true);
    }
  });

  it('returns the same successor pair to a retry inside the grace window, with what is left of its lifetimes', async () => {
    const first = await signIn(gateway.app, 'trent@example.com');
    const a = body(await refresh(first.refreshToken)).data;
    clock.advance(5);
    const b = body(await refresh(first.refreshToken)).data;
    expect(b).toEqual({ ...a, expiresIn: a.expiresIn - 5, refreshExpiresIn: a.refreshExpiresIn - 5 });
    // To the second (the token's times are whole seconds).
    const left = decode(b.accessToken).payload.exp - clock.now().getTime() / 1000;
    expect(Math.abs(left - b.expiresIn)).toBeLessThan(1);
  });

  it('returns the newest pair to a retry inside the grace window when its successor was rotated too: no token handed out is later taken for theft', async () => {
    const first = await signIn(gateway.app, 'tessa@example.com');
    const a = body(await refresh(first.refreshToken)).data;
    clock.advance(2);
    // Another tab refreshed again at once with the pair it got.
    const b = body(await refresh(a.refreshToken)).data;
    clock.advance(2);
    const retried = body(await refresh(first.refreshToken)).data;
    expect(retried).toEqual({ ...b, expiresIn: b.expiresIn - 2, refreshExpiresIn: b.refreshExpiresIn - 2 });
    // Past the window, the pair the retry got still refreshes: the session lives on.
    await ageRotations(gateway, 11);
    const next = await refresh(retried.refreshToken);
    expect(next.statusCode).toBe(200);
    expect((await listSessions(body(next).data.accessToken)).statusCode).toBe(200);
  });

  it('ends the whole session when a rotated token is reused after the grace window', async () => {
    const first = await signIn(gateway.app, 'ursula@example.com');
    const next = body(await refresh(first.refreshToken)).data;
    await ageRotations(gateway, 11);
    const reuse = await refresh(first.refreshToken);
    expect(reuse.statusCode).toBe(401);
    expect(body(reuse).errors[0]).toBe('Authentication required');
    // The thief's and the victim's tokens of that session all stop working.
    expect((await refresh(next.refreshToken)).statusCode).toBe(401);
    expect((await listSessions(next.accessToken)).statusCode).toBe(401);
    expect((await listSessions(first.accessToken)).statusCode).toBe(401);
  });

  it("never lets a session's access token pass again once a logout has ended it during a refresh", async () => {
    const first = await signIn(gateway.app, 'wanda@example.com');
    // The interleaving: the refresh rotates, the logout ends the session and deletes its key, the
    // refresh then finds no key to extend. Each key write after that is followed by a request with
    // the session's access token, made while the refresh is still under way.
    const redis = gateway.app.redis;
    const set = redis.set.bind(redis) as (...args: unknown[]) => Promise<unknown>;
    let loggedOut: () => void = () => {};
    const logout = new Promise<void>((resolve) => {
      loggedOut = resolve;
    });
    let extending = false;
    const during: number[] = [];
    redis.set = (async (...args: unknown[]) => {
      if (!extending && args.includes('XX')) {
        extending = true;
        await logout;
        return set(...args);
      }
      const answer = await set(...args);
      if (extending) during.push((await listSessions(first.accessToken)).statusCode);
      return answer;
    }) as typeof redis.set;
    try {
      const refreshing = refresh(first.refreshToken);
      while (!extending) await new Promise((resolve) => setImmediate(resolve));
      const out = await post(gateway.app, '/api/v1/auth/logout', {}, bearer(first.accessToken));
      expect(body(out).data).toEqual({ revokedSessions: 1 });
      loggedOut();
      expect((await refreshing).statusCode).toBe(401);
    } finally {
      redis.set = set as typeof redis.set;
    }
    expect(during.length).toBeGreaterThan(0);
    expect(during.every((status) => status === 401)).toBe(true);
    expect((await listSessions(first.accessToken)).statusCode).toBe(401);
  });

  it('answers a refresh whose session key Redis loses twice with its pair; the next refresh sets the key', async () => {
    const first = await signIn(gateway.app, 'yolanda@example.com');
    const redis = gateway.app.redis;
    const key = `session:${sidOf(first.accessToken)}`;
    await redis.del(key);
    // Lost again just after the refresh writes it empty.
    const set = redis.set.bind(redis) as (...args: unknown[]) => Promise<unknown>;
    redis.set = (async (...args: unknown[]) => {
      const answer = await set(...args);
      if (args[0] === key && args[1] === '') await redis.del(key);
      return answer;
    }) as typeof redis.set;
    let pair: ReturnType<typeof body>['data'];
    try {
      const answer = await refresh(first.refreshToken);
      expect(answer.statusCode).toBe(200);
      pair = body(answer).data;
    } finally {
      redis.set = set as typeof redis.set;
    }
    // Its access token waits for the key, as while Redis is away; the next refresh brings it back.
    expect((await listSessions(pair.accessToken)).statusCode).toBe(401);
    const again = body(await refresh(pair.refreshToken)).data;
    expect((await listSessions(again.accessToken)).statusCode).toBe(200);
  });

  it('judges a retry alike on gateways whose clocks differ by more than the grace window', async () => {
    // A second gateway on the same database and Redis, its clock 20 s ahead of the first's.
    const ahead = manualClock(new Date(clock.now().getTime() + 20_000));
    const other = await buildApp(gateway.config, { clock: ahead, checkResponses: true });
    try {
      // Rotated on one gateway, retried at once on the other: the same pair, told from its clock.
      const first = await signIn(gateway.app, 'vera@example.com');
      const a = body(await refresh(first.refreshToken)).data;
      const b = await post(other, REFRESH, { refreshToken: first.refreshToken });
      expect(b.statusCode).toBe(200);
      expect(body(b).data).toEqual({
        ...a,
        expiresIn: a.expiresIn - 20,
        refreshExpiresIn: a.refreshExpiresIn - 20,
      });
      // Rotated on the gateway ahead, retried on the one behind after the window: a reuse.
      const second = await signIn(other, 'walt@example.com');
      const c = body(await post(other, REFRESH, { refreshToken: second.refreshToken })).data;
      await ageRotations(gateway, 11);
      expect((await refresh(second.refreshToken)).statusCode).toBe(401);
      expect((await refresh(c.refreshToken)).statusCode).toBe(401);
    } finally {
      await other.close();
    }
  });

  it("keeps no successor the database and a session's old token open without the gateway's key", async () => {
    // A dump of refresh_tokens and an old token of the session (an old backup of a device, a log):
    // the sealed successors must not lead from it to the session's current token.
    const first = await signIn(gateway.app, 'wendy@example.com');
    let current = first.refreshToken;
    for (let i = 0; i < 3; i++) {
      clock.advance(1);
      current = body(await refresh(current)).data.refreshToken;
    }
    const rows = await gateway.app.db
      .selectFrom('refreshTokens')
      .select(['tokenHash', 'successorSealed'])
      .execute();
    const sealedAfter = (token: string) =>
      rows.find((row) => row.tokenHash.equals(hashOf(token)))?.successorSealed;
    const sealed = sealedAfter(first.refreshToken);
    expect(sealed).toBeInstanceOf(Buffer);
    // With the token alone, as the key was derived before (either layout): nothing opens.
    const withTokenAlone = (token: string, seal: Buffer) =>
      [0, 1].map((at) => {
        const decipher = createDecipheriv('aes-256-gcm', keyOfTokenAlone(token), seal.subarray(at, at + 12));
        decipher.setAuthTag(seal.subarray(at + 12, at + 28));
        try {
          return Buffer.concat([decipher.update(seal.subarray(at + 28)), decipher.final()]).toString();
        } catch {
          return undefined;
        }
      });
    expect(withTokenAlone(first.refreshToken, sealed as Buffer)).toEqual([undefined, undefined]);
    expect(() => successorSealer('x'.repeat(40)).open(first.refreshToken, sealed as Buffer)).toThrow();
    // The gateway, with its key, opens it for a retry inside the grace window.
    expect(successorSealer(gateway.config.otp.secret).open(first.refreshToken, sealed as Buffer)).toMatch(
      /^[\w-]{43}$/,
    );
  });

  it('opens a successor sealed by a gateway of an earlier version, with the rotated token alone', async () => {
    const first = await signIn(gateway.app, 'xena@example.com');
    const successor = body(await refresh(first.refreshToken)).data;
    // As an earlier gateway sealed it: no version byte, a key from the token alone.
    await storeSeal(first.refreshToken, sealedWithTokenAlone(first.refreshToken, successor.refreshToken));
    clock.advance(2);
    const retried = await refresh(first.refreshToken);
    expect(retried.statusCode).toBe(200);
    expect(body(retried).data.refreshToken).toBe(successor.refreshToken);
  });

  it('opens no seal of a layout it does not know with the token alone (no downgrade)', async () => {
    const first = await signIn(gateway.app, 'zack@example.com');
    const successor = body(await refresh(first.refreshToken)).data;
    // "Version 2" in front of what the token alone opens.
    await storeSeal(
      first.refreshToken,
      sealedWithTokenAlone(first.refreshToken, successor.refreshToken, Buffer.of(2)),
    );
    clock.advance(2);
    expect((await refresh(first.refreshToken)).statusCode).toBe(401);
  });

  it('answers 401, not an error, to a retry whose successor was sealed under another OTP_SECRET', async () => {
    const first = await signIn(gateway.app, 'yuri@example.com');
    const successor = body(await refresh(first.refreshToken)).data;
    // Sealed by a gateway whose OTP_SECRET was changed since (within the grace window).
    await storeSeal(
      first.refreshToken,
      successorSealer('y'.repeat(40)).seal(first.refreshToken, successor.refreshToken),
    );
    clock.advance(2);
    const retried = await refresh(first.refreshToken);
    expect(retried.statusCode).toBe(401);
    // The session goes on for the holder of the successor.
    expect((await listSessions(successor.accessToken)).statusCode).toBe(200);
  });

  it('answers 401 to a retry whose chain of rotations holds a seal under another OTP_SECRET, or is longer than it follows', async () => {
    const first = await signIn(gateway.app, 'yvonne@example.com');
    const a = body(await refresh(first.refreshToken)).data;
    const b = body(await refresh(a.refreshToken)).data;
    // The second rotation was taken by a gateway whose OTP_SECRET was changed since.
    await storeSeal(a.refreshToken, successorSealer('y'.repeat(40)).seal(a.refreshToken, b.refreshToken));
    clock.advance(2);
    expect((await refresh(first.refreshToken)).statusCode).toBe(401);
    // Not the spent pair of the first rotation; and the session goes on for the holder of the newest.
    expect((await listSessions(b.accessToken)).statusCode).toBe(200);

    // The token a retry presents rotated, then its successors nine times: past the eight it follows.
    let newest = b;
    const retried = newest.refreshToken;
    for (let i = 0; i < 10; i++) newest = body(await refresh(newest.refreshToken)).data;
    expect((await refresh(retried)).statusCode).toBe(401);
    expect((await listSessions(newest.accessToken)).statusCode).toBe(200);
  });

  it('refuses an unknown token with 401 and a missing one with 400', async () => {
    expect((await refresh('x'.repeat(43))).statusCode).toBe(401);
    const missing = await post(gateway.app, REFRESH, {});
    expect(missing.statusCode).toBe(400);
    expect(body(missing).errors[1]).toBe("body must have required property 'refreshToken'");
  });

  it('gives 20 parallel refreshes of one token the same single successor; reuse after the window ends the session', async () => {
    const first = await signIn(gateway.app, 'walter@example.com');
    const sid = decode(first.accessToken).payload.sid;
    clock.advance(1);
    const responses = await Promise.all(Array.from({ length: 20 }, () => refresh(first.refreshToken)));
    expect(responses.map((response) => response.statusCode)).toEqual(Array(20).fill(200));
    const pairs = responses.map((response) => body(response).data);
    expect(new Set(pairs.map((pair) => pair.refreshToken)).size).toBe(1);
    expect(new Set(pairs.map((pair) => pair.accessToken)).size).toBe(1);
    const [successor] = pairs;
    expect(successor.refreshToken).not.toBe(first.refreshToken);

    // One rotation: the presented token, rotated, and exactly one successor, the one returned.
    const rows = await gateway.app.db
      .selectFrom('refreshTokens')
      .select(['tokenHash', 'rotatedAt'])
      .where('sessionId', '=', sid)
      .execute();
    const hash = (token: string) => createHash('sha256').update(token).digest();
    expect(rows).toHaveLength(2);
    const live = rows.filter((row) => row.rotatedAt === null);
    expect(live).toHaveLength(1);
    expect(live[0]?.tokenHash.equals(hash(successor.refreshToken))).toBe(true);
    expect(rows.find((row) => row.rotatedAt)?.tokenHash.equals(hash(first.refreshToken))).toBe(true);
    expect((await listSessions(successor.accessToken)).statusCode).toBe(200);

    await ageRotations(gateway, 11);
    const reuse = await refresh(first.refreshToken);
    expect(reuse.statusCode).toBe(401);
    expect((await listSessions(successor.accessToken)).statusCode).toBe(401);
    expect((await refresh(successor.refreshToken)).statusCode).toBe(401);
  });

  it('refuses a refresh token past REFRESH_TOKEN_TTL', async () => {
    const first = await signIn(gateway.app, 'victor@example.com');
    clock.advance(2_592_000 + 1);
    expect((await refresh(first.refreshToken)).statusCode).toBe(401);
  });
});
