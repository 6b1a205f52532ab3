import { type PrivateRedis, startPrivateRedis } from '@tessera/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runSessionsCli } from '../src/sessions-cli.ts';
import { bearer, body, post, signIn, startGateway, type TestGateway } from './helpers.ts';

// The operator's sign-out (`pnpm --filter @tessera/auth-gateway sessions:end`), run against the
// Postgres and Redis of a running gateway, as the README's incident steps use it.

const SESSIONS = '/api/v1/auth/sessions';
const REFRESH = '/api/v1/auth/refresh-token';

let gateway: TestGateway;
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  gateway = await startGateway();
  const { config } = gateway;
  env = {
    APP_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: config.database.url,
    REDIS_URL: config.redis.url,
    REDIS_KEY_PREFIX: config.redis.keyPrefix,
  };
});
afterAll(() => gateway?.close());

/** Runs the command; its exit code and what it printed. */
const sessionsEnd = (...args: string[]) => sessionsEndWith({}, ...args);

/** The same, with `more` in its environment. */
async function sessionsEndWith(more: NodeJS.ProcessEnv, ...args: string[]) {
  const out = vi.spyOn(console, 'log').mockImplementation(() => {});
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  try {
    const code = await runSessionsCli(['end', ...args], { ...env, ...more });
    return { code, out: out.mock.calls.join('\n'), err: err.mock.calls.join('\n') };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

const works = async (accessToken: string) =>
  (await gateway.app.inject({ url: SESSIONS, headers: bearer(accessToken) })).statusCode === 200;
const refreshes = async (refreshToken: string) =>
  (await post(gateway.app, REFRESH, { refreshToken })).statusCode === 200;

describe('sessions:end --user', () => {
  it("ends every session of the account, by its address or its id: its tokens are refused at once, others' are not", async () => {
    const phone = await signIn(gateway.app, 'olga@example.com');
    const laptop = await signIn(gateway.app, 'olga@example.com');
    const other = await signIn(gateway.app, 'pavel@example.com');

    // As a user reporting a takeover writes the address.
    // It names the account it found, which the operator checks was the one meant.
    expect(await sessionsEnd('--user', ' Olga@Example.COM ')).toEqual({
      code: 0,
      out: `sessions ended: 2 (account ${phone.user._id}, olga@example.com); keys deleted: 2`,
      err: '',
    });
    for (const session of [phone, laptop]) {
      expect(await works(session.accessToken)).toBe(false);
      expect(await refreshes(session.refreshToken)).toBe(false);
    }
    expect(await works(other.accessToken)).toBe(true);

    // The account's events say who ended them: no address, the operator's command.
    const again = await signIn(gateway.app, 'olga@example.com');
    const events = await gateway.app.inject({
      url: '/api/v1/users/me/security-events',
      headers: bearer(again.accessToken),
    });
    expect(body(events).data.list[1]).toMatchObject({
      type: 'logout',
      ipAddress: null,
      userAgent: 'Tessera operator (sessions:end)',
      sessionId: null,
    });

    // By id, with --json: the session just started ends too.
    expect(await sessionsEnd('--user', again.user._id.toUpperCase(), '--json')).toMatchObject({
      code: 0,
      out: JSON.stringify({
        users: 1,
        sessionsEnded: 1,
        userId: again.user._id,
        email: 'olga@example.com',
        keysDeleted: 1,
      }),
    });
    expect(await works(again.accessToken)).toBe(false);
  });

  it('says so, and changes nothing, when no account has the address or the id', async () => {
    const other = await signIn(gateway.app, 'quentin@example.com');
    for (const user of ['nobody@example.com', '00000000-0000-4000-8000-000000000000'])
      expect(await sessionsEnd('--user', user)).toEqual({
        code: 2,
        out: '',
        err: `sessions end: no account of ${user}`,
      });
    expect(await works(other.accessToken)).toBe(true);
  });

  it('needs, in production, the database and Redis settings alone: none of the secrets a gateway needs', async () => {
    const session = await signIn(gateway.app, 'sven@example.com');
    expect(await sessionsEndWith({ APP_ENV: 'production' }, '--user', 'sven@example.com')).toEqual({
      code: 0,
      out: `sessions ended: 1 (account ${session.user._id}, sven@example.com); keys deleted: 1`,
      err: '',
    });
    expect(await works(session.accessToken)).toBe(false);
  });
});

describe('sessions:end --all', () => {
  it("ends every account's sessions, more accounts than one turn takes", async () => {
    const signedIn = [];
    for (let i = 0; i < 20; i++) signedIn.push(await signIn(gateway.app, `many-${i}@example.com`));

    const { code, out } = await sessionsEnd('--all', '--json');

    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.users).toBeGreaterThanOrEqual(20);
    expect(report.sessionsEnded).toBeGreaterThanOrEqual(20);
    for (const session of signedIn) expect(await works(session.accessToken)).toBe(false);
    // Again with its cut-off: nothing more to end, of no account (as its dry run would say); a session
    // started since is left.
    const since = await signIn(gateway.app, 'many-0@example.com');
    const again = await sessionsEnd('--all', '--started-before', report.startedBefore, '--json');
    expect(JSON.parse(again.out)).toMatchObject({ sessionsEnded: 0, users: 0 });
    expect(await works(since.accessToken)).toBe(true);
  });
});

describe('sessions:end --dry-run', () => {
  it('says what would end, and ends nothing; its cut-off then ends exactly those', async () => {
    const phone = await signIn(gateway.app, 'rita@example.com');
    const laptop = await signIn(gateway.app, 'rita@example.com');
    // One ended already: not counted.
    await post(
      gateway.app,
      '/api/v1/auth/revoke-token',
      { refreshToken: laptop.refreshToken },
      bearer(laptop.accessToken),
    );

    expect(await sessionsEnd('--user', 'rita@example.com', '--dry-run')).toEqual({
      code: 0,
      out: `sessions to end: 1 (account ${phone.user._id}, rita@example.com); a dry run, nothing ended`,
      err: '',
    });
    expect(await works(phone.accessToken)).toBe(true);

    const planned = await sessionsEnd('--all', '--dry-run', '--json');
    const plan = JSON.parse(planned.out);
    expect(plan).toMatchObject({ dryRun: true, sessionsEnded: 0 });
    expect(plan.sessionsToEnd).toBeGreaterThanOrEqual(1);
    expect(await works(phone.accessToken)).toBe(true);
    const text = await sessionsEnd('--all', '--started-before', plan.startedBefore, '--dry-run');
    expect(text.out).toBe(
      `sessions to end: ${plan.sessionsToEnd} (${plan.users} ${plan.users === 1 ? 'account' : 'accounts'}, started before ${plan.startedBefore}); a dry run, nothing ended; to end exactly these: --all --started-before ${plan.startedBefore}`,
    );

    // A session started after the dry run's cut-off is left by the ending that takes it.
    const since = await signIn(gateway.app, 'rita@example.com');
    const ended = JSON.parse(
      (await sessionsEnd('--all', '--started-before', plan.startedBefore, '--json')).out,
    );
    expect(ended.sessionsEnded).toBe(plan.sessionsToEnd);
    expect(await works(phone.accessToken)).toBe(false);
    expect(await works(since.accessToken)).toBe(true);
  });
});

describe('sessions:end --all, when an account cannot be ended', () => {
  it('stops saying how far it got, and a second run ends the rest', async () => {
    const [free, held] = [
      await signIn(gateway.app, 'free@example.com'),
      await signIn(gateway.app, 'held@example.com'),
    ];
    // Another transaction holds the session row of one account past the statement timeout.
    const holder = new pg.Client({ connectionString: gateway.config.database.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select * from sessions where user_id = $1 for update', [held.user._id]);
      const stopped = await sessionsEndWith({ DATABASE_STATEMENT_TIMEOUT: '1' }, '--all');
      expect(stopped.code).toBe(1);
      expect(stopped.err).toMatch(
        /^sessions end: .* accounts ended before it; run it again with --started-before \S+Z\)$/,
      );
      expect(await works(held.accessToken)).toBe(true);
      await holder.query('rollback');
    } finally {
      await holder.end();
    }
    expect((await sessionsEnd('--all')).code).toBe(0);
    expect(await works(held.accessToken)).toBe(false);
    expect(await works(free.accessToken)).toBe(false);
  });
});

describe('sessions:end --all, when Redis refuses to delete the keys', () => {
  let redis: PrivateRedis;
  let own: TestGateway;
  beforeAll(async () => {
    // A Redis of the test's own: its users are the server's.
    redis = await startPrivateRedis();
    own = await startGateway({ REDIS_URL: redis.url });
  });
  afterAll(async () => {
    await own?.close();
    await redis?.remove();
  });

  it('says so, and a second run deletes them: the access tokens are refused then', async () => {
    const victim = await signIn(own.app, 'keys-kept@example.com');
    const listed = async () =>
      (await own.app.inject({ url: SESSIONS, headers: bearer(victim.accessToken) })).statusCode;
    const ownEnv = {
      ...env,
      DATABASE_URL: own.config.database.url,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: own.config.redis.keyPrefix,
    };
    // A Redis user that may not delete: the sessions end in Postgres, their keys stay.
    const admin = new Redis(redis.url);
    await admin.call('ACL', 'SETUSER', 'no-delete', 'on', '>pw', '~*', '&*', '+@all', '-del', '-unlink');
    admin.disconnect();
    const url = new URL(redis.url);
    url.username = 'no-delete';
    url.password = 'pw';

    const refused = await sessionsEndWith({ ...ownEnv, REDIS_URL: url.toString() }, '--all');
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/NOPERM.*run it again with --started-before \S+\)$/);
    expect(await listed()).toBe(200);

    // Run again as it says: its cut-off, so that a sign-in since stays.
    const cutoff = /--started-before (\S+)\)$/.exec(refused.err)?.[1] ?? '';
    const since = await signIn(own.app, 'signed-in-since@example.com');
    expect((await sessionsEndWith(ownEnv, '--all', '--started-before', cutoff)).code).toBe(0);
    expect(await listed()).toBe(401);
    expect((await own.app.inject({ url: SESSIONS, headers: bearer(since.accessToken) })).statusCode).toBe(
      200,
    );
  });
});

describe("sessions:end, given another key prefix than the gateways'", () => {
  it("says it found none of the ended sessions' keys, and a run with the gateways' refuses the access tokens", async () => {
    const session = await signIn(gateway.app, 'ulla@example.com');
    expect(await sessionsEndWith({ REDIS_KEY_PREFIX: 'staging:' }, '--user', 'ulla@example.com')).toEqual({
      code: 1,
      out: `sessions ended: 1 (account ${session.user._id}, ulla@example.com); keys deleted: 0`,
      err:
        'sessions end: ended 1 session in Postgres, but none of their keys was on this Redis under ' +
        'REDIS_KEY_PREFIX "staging:": if the gateways keep theirs on another Redis or prefix, those access ' +
        'tokens work until they expire (if Redis lost them, they are refused already); run it again with ' +
        "the gateways' REDIS_URL (REDIS_CLUSTER_NODES) and REDIS_KEY_PREFIX",
    });
    expect(await works(session.accessToken)).toBe(true);

    // The repair ends nothing more, and deletes the key: what its line says.
    expect(await sessionsEnd('--user', 'ulla@example.com')).toEqual({
      code: 0,
      out: `sessions ended: 0 (account ${session.user._id}, ulla@example.com); keys deleted: 1`,
      err: '',
    });
    expect(await works(session.accessToken)).toBe(false);
    expect(await refreshes(session.refreshToken)).toBe(false);
  });
});

describe('sessions:end, given a misspelled setting', () => {
  it('names it, as the gateway does at start, beside what it did without it', async () => {
    const session = await signIn(gateway.app, 'vera@example.com');
    const { code, err } = await sessionsEndWith(
      { REDIS_KEY_PREFIX: undefined, REDIS_KEY_PREFX: env.REDIS_KEY_PREFIX },
      '--user',
      'vera@example.com',
    );
    expect(err.split('\n')[0]).toBe(
      'sessions end: REDIS_KEY_PREFX is no setting of Tessera and is ignored: did you mean REDIS_KEY_PREFIX?',
    );
    // Run on the default prefix, it found none of the gateway's keys, and says so.
    expect(code).toBe(1);
    expect(err).toContain('none of their keys was on this Redis under REDIS_KEY_PREFIX "tessera:"');
    expect(await works(session.accessToken)).toBe(true);
  });
});

describe('sessions:end, misused', () => {
  it('answers 2 with the usage, touching nothing', async () => {
    for (const args of [[], ['--user', 'a@example.com', '--all']]) {
      const { code, err } = await sessionsEnd(...args);
      expect(code).toBe(2);
      expect(err).toContain('give either --user or --all');
    }
  });

  it('refuses --user given twice, which would end one of the two accounts', async () => {
    const first = await signIn(gateway.app, 'twice-1@example.com');
    const second = await signIn(gateway.app, 'twice-2@example.com');
    expect(await sessionsEnd('--user', 'twice-1@example.com', '--user', 'twice-2@example.com')).toMatchObject(
      {
        code: 2,
        err: expect.stringContaining('give --user (one account at a time) and --started-before once each'),
      },
    );
    expect(await works(first.accessToken)).toBe(true);
    expect(await works(second.accessToken)).toBe(true);
  });

  it('prints the usage for --help, and succeeds', async () => {
    const { code, out } = await sessionsEnd('--help');
    expect(code).toBe(0);
    expect(out).toContain('usage: sessions-cli.ts end --user <email or user id>');
  });

  it('takes --started-before for --all only, and only a time', async () => {
    expect(
      await sessionsEnd('--user', 'a@example.com', '--started-before', '2026-11-28T00:00:00Z'),
    ).toMatchObject({
      code: 2,
      err: expect.stringContaining('--started-before is for --all'),
    });
    expect(await sessionsEnd('--all', '--started-before', 'yesterday')).toMatchObject({
      code: 2,
      err: expect.stringContaining('--started-before: not a time: yesterday'),
    });
    // Without its offset, a time would be read in the host's time zone: which sessions end would depend on it.
    for (const local of ['2026-11-28 10:00', '2026-11-28T10:00:00', '2026-11-28', '11-28-2026'])
      expect(await sessionsEnd('--all', '--started-before', local)).toMatchObject({
        code: 2,
        err: expect.stringContaining(
          `give an ISO 8601 time with its offset (2026-11-28T10:00:00Z): ${local}`,
        ),
      });
    // A date that does not exist would be moved to another (30 February to 2 March).
    for (const impossible of ['2026-02-30T10:00:00Z', '2026-11-28T24:00:00Z'])
      expect(await sessionsEnd('--all', '--started-before', impossible)).toMatchObject({
        code: 2,
        err: expect.stringContaining(`--started-before: no such time: ${impossible}`),
      });
  });

  it('answers 1 with one line when Postgres cannot be reached', async () => {
    const unreachable = { ...env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/tessera' };
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await runSessionsCli(['end', '--all'], unreachable)).toBe(1);
      expect(err.mock.calls.join('\n')).toMatch(
        /^sessions end: postgres is unavailable: connect ECONNREFUSED/,
      );
    } finally {
      err.mockRestore();
    }
  });
});
