import {
  DELETION_CANCELLED_JOB,
  DELETION_SCHEDULED_JOB,
  DependencyUnavailableError,
  deletionCancelledJobId,
  deletionScheduledJobId,
  EMAIL_BACKOFF,
  EMAIL_JOB_OPTIONS,
  NOTICE_RETRY_WINDOW_MS,
  noticesKey,
} from '@tessera/contracts';
import { createMailWorker } from '@tessera/mailer';
import { loadConfig as loadMailerConfig } from '@tessera/mailer/config';
import { createTransport, type MailTransport } from '@tessera/mailer/transport';
import {
  createTestDatabase,
  createTestRedis,
  type ReceivedMail,
  type SmtpSink,
  startSmtpSink,
  type TestDatabase,
  type TestRedis,
} from '@tessera/testing';
import type { Redis } from 'ioredis';
import { type Kysely, sql, type Transaction, type Updateable } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import type { Clock } from '../src/clock.ts';
import { loadConfig } from '../src/config.ts';
import type { Database, UsersTable } from '../src/database.ts';
import { createAccountDeletion } from '../src/modules/account-deletion/account-deletion.service.ts';
import { createEmailQueue } from '../src/modules/email/email.queue.ts';
import { createSecurityLog } from '../src/modules/security-events/security-events.ts';
import { createActiveSessionStore } from '../src/modules/sessions/active-sessions.store.ts';
import { generateSigningKeyPem } from '../src/modules/tokens/keys.ts';
import {
  bearer,
  body,
  capturedLog,
  GENEROUS_LIMITS,
  type Json,
  manualClock,
  post,
  sidOf,
  signIn,
} from './helpers.ts';

type App = Awaited<ReturnType<typeof buildApp>>;

const DELETION = '/api/v1/users/me/deletion';
const ME = '/api/v1/users/me';
/** Shorter than the access tokens' lifetime (3600 s), so that the tokens of the tests outlive it. */
const GRACE = 1800;
const SIGNING_KEY = generateSigningKeyPem();
// Now, to the minute: Redis keeps codes and limits by its own time, so the clocks start from it.
const START = new Date(Math.floor(Date.now() / 60_000) * 60_000).toISOString();
const at = (iso: string, plusSeconds = 0) => new Date(Date.parse(iso) + plusSeconds * 1000).toISOString();

/** `22 December 2026 at 10:00 UTC`, written here independently of the mailer's own formatting. */
function longDate(iso: string): string {
  const day = new Intl.DateTimeFormat('en-GB', {
    day: 'numeric',
    month: 'long',
    year: 'numeric',
    timeZone: 'UTC',
  }).format(new Date(iso));
  return `${day} at ${iso.slice(11, 16)} UTC`;
}
const numbersOf = (text: string) => new Set(text.match(/\d+/g) ?? []);

/**
 * A database and Redis namespace of their own, on which gateways start, stop and restart as
 * processes of one deployment would. Each gateway's log lines are kept.
 */
interface Deployment {
  database: TestDatabase;
  redis: TestRedis;
  running: Set<App>;
}
const deployments: Deployment[] = [];

async function deployment(): Promise<Deployment> {
  const created = { database: await createTestDatabase(), redis: createTestRedis(), running: new Set<App>() };
  deployments.push(created);
  return created;
}

/** Every line a gateway logged, parsed. */
type Log = Record<string, unknown>[];

async function gateway(
  on: Deployment,
  clock: Clock,
  env: Record<string, string> = {},
): Promise<{ app: App; log: Log }> {
  const { lines: log, logStream } = capturedLog();
  const config = loadConfig({
    APP_ENV: 'test',
    // At debug, where a sweep's run tells its end.
    LOG_LEVEL: 'debug',
    DATABASE_URL: on.database.url,
    REDIS_URL: on.redis.url,
    REDIS_KEY_PREFIX: on.redis.keyPrefix,
    BULLMQ_PREFIX: on.redis.bullmqPrefix,
    JWT_PRIVATE_KEY: SIGNING_KEY,
    OTP_SECRET: 'test-otp-secret-that-is-long-enough-0123456789',
    TRUST_PROXY: 'true',
    ...GENEROUS_LIMITS,
    ACCOUNT_DELETION_GRACE: String(GRACE),
    ...env,
  });
  const app = await buildApp(config, { clock, logStream, checkResponses: true });
  on.running.add(app);
  // Its sweep at start has ended before the test moves the clock: only what the test makes due is.
  await app.ready();
  await eventually(
    async () =>
      log.some((line) => line.msg === 'sweep run ended' && line.sweep === 'account_deletion') || undefined,
    "the gateway's start-up sweep",
  );
  return { app, log };
}

async function stop(on: Deployment, app: App): Promise<void> {
  on.running.delete(app);
  await app.close();
}

afterAll(async () => {
  for (const { database, redis, running } of deployments) {
    await Promise.all([...running].map((app) => app.close()));
    await Promise.all([database.drop(), redis.flush()]);
  }
});

const requestDeletion = (app: App, accessToken: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: DELETION, headers: { ...bearer(accessToken), ...headers } });
const cancelDeletion = (app: App, accessToken: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'DELETE', url: DELETION, headers: { ...bearer(accessToken), ...headers } });
const me = (app: App, accessToken: string) => app.inject({ url: ME, headers: bearer(accessToken) });
const refresh = (app: App, refreshToken: string) => post(app, '/api/v1/auth/refresh-token', { refreshToken });

const userRow = (app: App, id: string) =>
  app.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const eventsOf = (app: App, userId: string) =>
  app.db
    .selectFrom('securityEvents')
    .select(['type', 'sessionId', 'ipAddress', 'userAgent', 'details', 'createdAt'])
    .where('userId', '=', userId)
    .orderBy('createdAt')
    .orderBy('id')
    .execute();
const sessionsOf = (app: App, userId: string) =>
  app.db
    .selectFrom('sessions')
    .select(['id', 'endedAt', 'endReason', 'ipAddress', 'userAgent'])
    .where('userId', '=', userId)
    .orderBy('createdAt')
    .execute();

/** A sweep of `app`'s deployment, run by the test itself. */
const sweeper = (app: App, clock: Clock, activeSessions = createActiveSessionStore(app.redis)) =>
  createAccountDeletion({
    db: app.db,
    emails: createEmailQueue(app.mailQueue, app.mailQueueRedis, app.mailQueue.opts.prefix ?? '', app.log),
    securityLog: createSecurityLog(app.db, app.log),
    clock,
    log: app.log,
    grace: GRACE,
    requestCooldown: 600,
    activeSessions,
  });

/**
 * Takes locks in a transaction of its own and holds them until `release`: resolves only once `lock` has
 * run, so what the test starts next surely finds them taken.
 */
async function holding(db: Kysely<Database>, lock: (holder: Transaction<Database>) => Promise<unknown>) {
  let locked = () => {};
  let release = () => {};
  const taken = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const held = db.transaction().execute(async (holder) => {
    await lock(holder);
    locked();
    await released;
  });
  await Promise.race([taken, held]);
  return async () => {
    release();
    await held;
  };
}

/** A check for `eventually`: at least `count` statements of the database wait on a lock, each for over `forMs`. */
const waitingOnLocks =
  (db: Kysely<Database>, count: number, forMs = 0) =>
  async () => {
    const { rows } = await sql<{ waiting: number }>`
    select count(*)::int as waiting from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock'
      and clock_timestamp() - query_start > ${forMs}::int * interval '1 millisecond'`.execute(db);
    return (rows[0]?.waiting ?? 0) >= count ? true : undefined;
  };

/** Polls until `check` returns a value (not undefined), for work done in the background. */
async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 8_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const finalized = (app: App, userId: string) =>
  eventually(async () => {
    const row = await userRow(app, userId);
    return row.accountDeletionStatus === 'finalized' ? row : undefined;
  }, `the deletion of ${userId} to be finalized`);

const phone = { 'user-agent': 'Phone/1.0', 'x-forwarded-for': '203.0.113.7' };
const laptop = { 'user-agent': 'Laptop/2.0', 'x-forwarded-for': '198.51.100.23' };

describe('requesting and cancelling a deletion', () => {
  const clock = manualClock(new Date(START));
  let app: App;
  beforeAll(async () => {
    // Sweeps once when ready, while nothing is due, and then not again during this block.
    ({ app } = await gateway(await deployment(), clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' }));
  });

  it('schedules the deletion ACCOUNT_DELETION_GRACE seconds ahead and answers the User', async () => {
    const alice = await signIn(app, 'alice@example.com', phone);
    expect(alice.user.accountDeletionStatus).toBeNull();
    clock.advance(60);

    const response = await requestDeletion(app, alice.accessToken, phone);
    expect(response.statusCode).toBe(200);
    const user = body(response).data;
    expect(user).toMatchObject({
      _id: alice.user._id,
      email: 'alice@example.com',
      accountDeletionStatus: 'scheduled',
      accountDeletionRequestedAt: at(START, 60),
      accountDeletionScheduledFor: at(START, 60 + GRACE),
      accountDeletionCancelledAt: null,
      accountDeletionFinalizedAt: null,
    });
    // Everything still works while the deletion is scheduled.
    expect(body(await me(app, alice.accessToken)).data).toEqual(user);
    expect((await refresh(app, alice.refreshToken)).statusCode).toBe(200);
  });

  it('answers 409 to a second request, leaving the first one as it was', async () => {
    const bob = await signIn(app, 'bob@example.com');
    const first = body(await requestDeletion(app, bob.accessToken)).data;
    clock.advance(5);

    const again = await requestDeletion(app, bob.accessToken);
    expect(again.statusCode).toBe(409);
    expect(body(again).errors).toEqual([
      'Resource already exists or cannot be changed in its current state',
      'The deletion of this account is already scheduled',
    ]);
    expect(body(await me(app, bob.accessToken)).data).toEqual(first);
  });

  it('cancels a scheduled deletion, then answers 409 to a second cancel; a new request schedules afresh', async () => {
    const carol = await signIn(app, 'carol@example.com');
    const requested = body(await requestDeletion(app, carol.accessToken)).data;
    clock.advance(600);

    const cancelled = await cancelDeletion(app, carol.accessToken);
    expect(cancelled.statusCode).toBe(200);
    const cancelledAt = clock.now().toISOString();
    expect(body(cancelled).data).toMatchObject({
      accountDeletionStatus: 'cancelled',
      accountDeletionRequestedAt: requested.accountDeletionRequestedAt,
      accountDeletionScheduledFor: requested.accountDeletionScheduledFor,
      accountDeletionCancelledAt: cancelledAt,
      accountDeletionFinalizedAt: null,
    });

    const again = await cancelDeletion(app, carol.accessToken);
    expect(again.statusCode).toBe(409);
    expect(body(again).errors).toEqual([
      'Resource already exists or cannot be changed in its current state',
      'No deletion of this account is scheduled',
    ]);

    // Each change emails the account: a new request waits ACCOUNT_DELETION_REQUEST_COOLDOWN (600 s).
    clock.advance(60);
    const early = await requestDeletion(app, carol.accessToken);
    expect(early.statusCode).toBe(429);
    expect(early.headers['retry-after']).toBe('540');
    expect(body(early).errors).toEqual([
      'Too many requests',
      'The deletion of this account was cancelled too recently to schedule it again',
      'Try again in 540 seconds',
    ]);
    expect(body(await me(app, carol.accessToken)).data.accountDeletionStatus).toBe('cancelled');

    clock.advance(540);
    const renewed = await requestDeletion(app, carol.accessToken);
    expect(renewed.statusCode).toBe(200);
    expect(body(renewed).data).toMatchObject({
      accountDeletionStatus: 'scheduled',
      accountDeletionRequestedAt: clock.now().toISOString(),
      accountDeletionScheduledFor: at(clock.now().toISOString(), GRACE),
      accountDeletionCancelledAt: null,
    });
  });

  it('answers 409 to a cancel when no deletion was ever requested', async () => {
    const dave = await signIn(app, 'dave@example.com');
    const response = await cancelDeletion(app, dave.accessToken);
    expect(response.statusCode).toBe(409);
    expect(body(response).errors[1]).toBe('No deletion of this account is scheduled');
    expect(body(await me(app, dave.accessToken)).data.accountDeletionStatus).toBeNull();
  });

  it('records each transition as a security event of the session, from where it was asked', async () => {
    const erin = await signIn(app, 'erin@example.com', phone);
    const sid = sidOf(erin.accessToken);
    clock.advance(1);
    await requestDeletion(app, erin.accessToken, laptop);
    clock.advance(1);
    await cancelDeletion(app, erin.accessToken, laptop);

    const events = await eventsOf(app, erin.user._id);
    expect(events.map(({ type, details }) => [type, details])).toEqual([
      ['sign_in', {}],
      ['deletion_requested', { scheduledFor: at(clock.now().toISOString(), GRACE - 1) }],
      ['deletion_cancelled', {}],
    ]);
    for (const event of events.slice(1))
      expect(event).toMatchObject({ sessionId: sid, ipAddress: '198.51.100.23', userAgent: 'Laptop/2.0' });
    // The caller's own list shows them too.
    const listed = await app.inject({
      url: '/api/v1/users/me/security-events',
      headers: bearer(erin.accessToken),
    });
    expect(body(listed).data.list.map((event: Json) => event.type)).toEqual([
      'deletion_cancelled',
      'deletion_requested',
      'sign_in',
    ]);
  });

  it('refuses to cancel a deletion that is already due (409), even before the sweep has run', async () => {
    const fay = await signIn(app, 'fay@example.com');
    await requestDeletion(app, fay.accessToken);
    clock.advance(GRACE);
    const response = await cancelDeletion(app, fay.accessToken);
    expect(response.statusCode).toBe(409);
    expect(body(response).errors[1]).toBe(
      'The deletion of this account is due and can no longer be cancelled',
    );
  });

  it('signs the address in to a new account once the deletion is due, erasing the old one first, without waiting for the sweep', async () => {
    const gil = await signIn(app, 'gil@example.com', phone);
    await app.db.updateTable('users').set(LIVED_IN_PROFILE).where('id', '=', gil.user._id).execute();
    // A second apart, so that its events are listed in the order they happened.
    clock.advance(1);
    await requestDeletion(app, gil.accessToken);
    // Someone whose deletion is due at the same time: a sign-in erases its own account, not the others.
    const hal = await signIn(app, 'hal@example.com');
    await requestDeletion(app, hal.accessToken);

    // A second before the date, signing in keeps the account, whose deletion can still be cancelled.
    clock.advance(GRACE - 1);
    const before = await signIn(app, 'gil@example.com');
    expect(before.user).toMatchObject({ _id: gil.user._id, accountDeletionStatus: 'scheduled' });

    clock.advance(1);
    const after = await signIn(app, 'gil@example.com', laptop);
    expect(after.user._id).not.toBe(gil.user._id);
    expect(after.user).toMatchObject({
      ...ERASED,
      email: 'gil@example.com',
      lastLogin: clock.now().toISOString(),
      accountDeletionStatus: null,
    });
    expect(after.isRegistrationComplete).toBe(false);
    expect((await me(app, after.accessToken)).statusCode).toBe(200);

    // The old account is erased as the sweep erases it, and none of its tokens works any more.
    expect(await userRow(app, gil.user._id)).toMatchObject({
      ...ERASED,
      email: `DELETED-${gil.user._id}@tombstone.invalid`,
      accountDeletionStatus: 'finalized',
      accountDeletionFinalizedAt: new Date(clock.now()),
    });
    for (const { accessToken, refreshToken } of [gil, before]) {
      expect((await me(app, accessToken)).statusCode).toBe(401);
      expect((await refresh(app, refreshToken)).statusCode).toBe(401);
    }
    expect((await eventsOf(app, gil.user._id)).map((event) => event.type)).toEqual([
      'sign_in',
      'deletion_requested',
      'sign_in',
      'deletion_finalized',
    ]);
    expect(await eventsOf(app, after.user._id)).toMatchObject([
      { type: 'sign_in', ipAddress: '198.51.100.23', userAgent: 'Laptop/2.0' },
    ]);
    expect((await userRow(app, hal.user._id)).accountDeletionStatus).toBe('scheduled');
  });

  it('signs in to an account marked scheduled with no date (edited by hand), which is never due', async () => {
    const dot = await signIn(app, 'dot@example.com');
    await app.db
      .updateTable('users')
      .set({ accountDeletionStatus: 'scheduled', accountDeletionScheduledFor: null })
      .where('id', '=', dot.user._id)
      .execute();
    expect((await signIn(app, 'dot@example.com')).user._id).toBe(dot.user._id);
  });

  it("erases a signing-in address's due account even while another writer holds it: waits, where the sweep skips", async () => {
    // Between the sign-in statement that found the account due and its erasure, a profile change (a
    // session of the account, which works until the erasure) may hold the row: the sign-in's erasure
    // must wait for it, not skip it as a sweep skips another's rows, or the sign-in would find the
    // account still there.
    const ida = await signIn(app, 'ida@example.com');
    await requestDeletion(app, ida.accessToken);
    clock.advance(GRACE);
    const release = await holding(app.db, (holder) =>
      holder.selectFrom('users').select('id').where('id', '=', ida.user._id).forUpdate().execute(),
    );
    const deletion = sweeper(app, clock);
    const erasing = deletion.finalizeDue(1, 'ida@example.com');
    try {
      await eventually(waitingOnLocks(app.db, 1), "the sign-in's erasure to wait for the account");
      expect(await deletion.finalizeDue(100)).not.toContain(ida.user._id);
    } finally {
      await release();
    }
    expect(await erasing).toEqual([ida.user._id]);
    const again = await signIn(app, 'ida@example.com');
    expect(again.user._id).not.toBe(ida.user._id);
  });

  it('is documented: bearer only, with the User and every error status, all enveloped', async () => {
    const document = (await app.inject({ url: '/docs/json' })).json();
    for (const method of ['post', 'delete']) {
      const operation = document.paths['/api/v1/users/me/deletion'][method];
      expect(operation).toMatchObject({ tags: ['users'], security: [{ bearerAuth: [] }] });
      expect(operation.summary).toMatch(/deletion of the caller's account/);
      expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '401', '409', '503']));
      const ok = operation.responses['200'].content['application/json'].schema;
      expect(ok.properties.data).toEqual({ $ref: '#/components/schemas/User' });
    }
    expect(document.components.schemas.User.properties).toHaveProperty('accountDeletionScheduledFor');
  });

  it('answers 401 without a valid access token', async () => {
    expect((await app.inject({ method: 'POST', url: DELETION })).statusCode).toBe(401);
    expect((await app.inject({ method: 'DELETE', url: DELETION })).statusCode).toBe(401);
    expect((await requestDeletion(app, 'a.b.c')).statusCode).toBe(401);
  });
});

/**
 * The columns a tombstone keeps, as this test reads the product: written out here, not taken from the
 * erasure's own list, so that a column that list keeps by mistake is caught (filled in below, and
 * expected erased). A column added to `users` fails the typecheck below until it is given a value.
 */
type KeptByTombstone =
  | 'id'
  | 'email'
  | 'createdAt'
  | 'updatedAt'
  | 'accountDeletionStatus'
  | 'accountDeletionRequestedAt'
  | 'accountDeletionScheduledFor'
  | 'accountDeletionCancelledAt'
  | 'accountDeletionFinalizedAt'
  | 'roles'
  | 'creditBalance'
  | 'followersCount'
  | 'followingCount'
  | 'minutePriceInLiveStream';
type PersonalColumns = {
  [Column in Exclude<keyof UsersTable, KeptByTombstone>]-?: Exclude<
    Updateable<UsersTable>[Column],
    undefined
  >;
};

/** Every field of a profile filled in, as a user who has used the app for a while would have it. */
const LIVED_IN_PROFILE: PersonalColumns = {
  name: 'Ayşe',
  surname: 'Yılmaz',
  username: 'ayse.yilmaz',
  countryCode: '90',
  phoneNumber: '5321234567',
  signupSource: 'instagram',
  signupCampaign: 'spring-2026',
  profilePhoto: 'https://cdn.example.com/ayse.jpg',
  availabilityStatus: 'busy',
  birthDate: new Date('1990-05-01T00:00:00.000Z'),
  gender: 'female',
  interests: ['photography', 'sailing'],
  expertise: 'Portrait photography',
  bio: 'Photographer in Istanbul.',
  instagram: 'ayse.shoots',
  x: 'ayse_x',
  tiktok: 'ayse_tt',
  snapchat: 'ayse_snap',
  facebook: 'ayse.fb',
  timezone: 'Europe/Istanbul',
  privacyPolicyAccepted: true,
  privacyPolicyVersion: '1.0.0',
  termsOfUseAccepted: true,
  termsOfUseVersion: '1.0.0',
  consentFormAccepted: true,
  consentFormVersion: '1.0.0',
  lastUsernameChangeDate: new Date('2026-11-01T10:00:00.000Z'),
  lastLogin: new Date('2026-11-20T08:00:00.000Z'),
  isRegistrationComplete: true,
};

/** What is left of that profile once the account is erased: nothing of the person. */
const ERASED: PersonalColumns = {
  name: null,
  surname: null,
  username: null,
  countryCode: null,
  phoneNumber: null,
  signupSource: null,
  signupCampaign: null,
  profilePhoto: null,
  availabilityStatus: null,
  birthDate: null,
  gender: null,
  interests: [],
  expertise: null,
  bio: null,
  instagram: null,
  x: null,
  tiktok: null,
  snapchat: null,
  facebook: null,
  timezone: null,
  privacyPolicyAccepted: false,
  privacyPolicyVersion: null,
  termsOfUseAccepted: false,
  termsOfUseVersion: null,
  consentFormAccepted: false,
  consentFormVersion: null,
  lastUsernameChangeDate: null,
  lastLogin: null,
  isRegistrationComplete: false,
};

describe('finalization', () => {
  it('erases the account when the grace period is over: every token refused, a tombstone left, the email free again', async () => {
    const clock = manualClock(new Date(START));
    const { app, log } = await gateway(await deployment(), clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '1' });
    const onPhone = await signIn(app, 'ayse@example.com', phone);
    clock.advance(1);
    const onLaptop = await signIn(app, 'ayse@example.com', laptop);
    // Someone whose deletion is due a second before Ayşe's: its erasure tells that a sweep ran then.
    const early = await signIn(app, 'early@example.com');
    expect((await requestDeletion(app, early.accessToken)).statusCode).toBe(200);
    clock.advance(1);
    const id = onPhone.user._id;
    await app.db.updateTable('users').set(LIVED_IN_PROFILE).where('id', '=', id).execute();
    // Someone else, whose account the sweep must leave alone.
    const bystander = await signIn(app, 'bystander@example.com', laptop);

    const requested = body(await requestDeletion(app, onPhone.accessToken, phone)).data;
    const requestedAt = at(START, 2);
    const due = at(requestedAt, GRACE);
    expect(requested.accountDeletionScheduledFor).toBe(due);

    // A second before the date, a sweep erases only the account due then, and this one stays.
    clock.advance(GRACE - 1);
    const swept = await eventually(
      async () => log.find((line) => line.msg === 'accounts deleted'),
      'a sweep once the first account is due',
    );
    expect(swept.userIds).toEqual([early.user._id]);
    expect((await userRow(app, id)).accountDeletionStatus).toBe('scheduled');
    expect((await me(app, onLaptop.accessToken)).statusCode).toBe(200);

    clock.advance(1);
    const tombstone = await finalized(app, id);

    // Every token of every device is refused from the next request on.
    for (const { accessToken, refreshToken } of [onPhone, onLaptop]) {
      const refused = await me(app, accessToken);
      expect(refused.statusCode).toBe(401);
      expect(body(refused).errors[0]).toBe('Authentication required');
      expect((await refresh(app, refreshToken)).statusCode).toBe(401);
      expect((await requestDeletion(app, accessToken)).statusCode).toBe(401);
    }

    // The row stays, as a tombstone: the id is never handed out again.
    expect(tombstone).toMatchObject({
      ...ERASED,
      id,
      email: `DELETED-${id}@tombstone.invalid`,
      accountDeletionStatus: 'finalized',
      accountDeletionRequestedAt: new Date(requestedAt),
      accountDeletionScheduledFor: new Date(due),
      accountDeletionCancelledAt: null,
      accountDeletionFinalizedAt: new Date(due),
      updatedAt: new Date(due),
    });
    const sessions = await sessionsOf(app, id);
    expect(sessions).toHaveLength(2);
    for (const session of sessions)
      expect(session).toMatchObject({
        endedAt: new Date(due),
        endReason: 'account_deleted',
        ipAddress: null,
        userAgent: null,
      });
    const refreshTokensLeft = await app.db
      .selectFrom('refreshTokens')
      .select('tokenHash')
      .where(
        'sessionId',
        'in',
        sessions.map((session) => session.id),
      )
      .execute();
    expect(refreshTokensLeft).toEqual([]);

    // What happened stays on record, without where from.
    const events = await eventsOf(app, id);
    expect(events.map((event) => event.type)).toEqual([
      'sign_in',
      'sign_in',
      'deletion_requested',
      'deletion_finalized',
    ]);
    for (const event of events) expect(event).toMatchObject({ ipAddress: null, userAgent: null });
    expect(events.at(-1)).toMatchObject({ sessionId: null, createdAt: new Date(due) });

    // The bystander keeps everything.
    expect((await me(app, bystander.accessToken)).statusCode).toBe(200);
    expect((await eventsOf(app, bystander.user._id))[0]).toMatchObject({
      ipAddress: '198.51.100.23',
      userAgent: 'Laptop/2.0',
    });

    // The same address signs in again: a brand-new account.
    const again = await signIn(app, 'ayse@example.com');
    expect(again.user._id).not.toBe(id);
    expect(again.user).toMatchObject({ email: 'ayse@example.com', accountDeletionStatus: null, name: null });
    expect((await me(app, again.accessToken)).statusCode).toBe(200);
    // Nobody can sign in to the tombstone: its address, typed in, gets no code (.invalid takes no mail).
    const impostor = await post(app, '/api/v1/auth/send-otp-email', {
      email: `deleted-${id}@tombstone.invalid`,
    });
    expect(impostor.statusCode).toBe(400);
    expect((await userRow(app, id)).accountDeletionStatus).toBe('finalized');

    // Logged by id, never by address or name.
    expect(log).toContainEqual(expect.objectContaining({ msg: 'accounts deleted', userIds: [id] }));
    const logged = JSON.stringify(log);
    expect(logged).not.toContain('ayse@example.com');
    expect(logged).not.toContain('Ayşe');
  });

  it('happens even when the gateway that scheduled it is gone: another one, started later, finalizes it', async () => {
    const clock = manualClock(new Date(START));
    const shared = await deployment();
    const first = await gateway(shared, clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '1' });
    const gus = await signIn(first.app, 'gus@example.com');
    expect((await requestDeletion(first.app, gus.accessToken)).statusCode).toBe(200);
    await stop(shared, first.app);

    // Every process down while the date passes.
    clock.advance(GRACE + 600);
    const second = await gateway(shared, clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '1' });
    await second.app.ready();

    const tombstone = await finalized(second.app, gus.user._id);
    expect(tombstone.accountDeletionFinalizedAt).toEqual(clock.now());
    expect((await me(second.app, gus.accessToken)).statusCode).toBe(401);
    expect((await refresh(second.app, gus.refreshToken)).statusCode).toBe(401);
    expect(second.log).toContainEqual(
      expect.objectContaining({ msg: 'accounts deleted', userIds: [gus.user._id] }),
    );
  });

  it('leaves no working access token when a refresh sets the session key again before the sweep commits', async () => {
    const clock = manualClock(new Date(START));
    const { app } = await gateway(await deployment(), clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' });
    const ida = await signIn(app, 'ida@example.com');
    expect((await requestDeletion(app, ida.accessToken)).statusCode).toBe(200);
    clock.advance(GRACE);

    // The sweep, with the interleaving a refresh can cause: it rotated just before the sweep locked
    // the session, found the key the sweep had just deleted gone, and set it again, all before the
    // sweep's commit.
    const store = createActiveSessionStore(app.redis);
    let interleaved = false;
    const sweep = sweeper(app, clock, {
      ...store,
      async remove(sessionIds) {
        const removed = await store.remove(sessionIds);
        if (interleaved) return removed;
        interleaved = true;
        const until = new Date(clock.now().getTime() + 3_600_000);
        for (const id of sessionIds) {
          await store.reserve(id, until, clock.now());
          await store.assign(id, ida.user._id, until, clock.now());
        }
        return removed;
      },
    });

    expect(await sweep.finalizeDue(10)).toEqual([ida.user._id]);
    expect(interleaved).toBe(true);
    expect((await me(app, ida.accessToken)).statusCode).toBe(401);
    // /me reads the account too; the routes that read only the key must refuse the token as well.
    expect(await store.holder(sidOf(ida.accessToken))).toBeNull();
    expect(
      (await app.inject({ url: '/api/v1/auth/sessions', headers: bearer(ida.accessToken) })).statusCode,
    ).toBe(401);
  });

  it("ends a user's sessions in the sweep's lock order, the account first, so the two never deadlock", async () => {
    const clock = manualClock(new Date(START));
    const { app, log } = await gateway(await deployment(), clock, {
      ACCOUNT_DELETION_SWEEP_INTERVAL: '3600',
    });
    const kim = await signIn(app, 'kim@example.com');

    // The sweep's locks, in its order: the account's row, then (a logout waiting meanwhile) its
    // sessions'. A logout that locked the sessions first would wait for the account while the sweep
    // waits for the sessions: Postgres would then fail one of them.
    let logout: ReturnType<typeof post> | undefined;
    await app.db.transaction().execute(async (sweep) => {
      await sweep.selectFrom('users').select('id').where('id', '=', kim.user._id).forUpdate().execute();
      logout = post(app, '/api/v1/auth/logout', {}, bearer(kim.accessToken));
      await eventually(waitingOnLocks(app.db, 1), 'the logout to wait on a lock');
      await sweep
        .updateTable('sessions')
        .set({ endedAt: clock.now(), endReason: 'account_deleted' })
        .where('userId', '=', kim.user._id)
        .execute();
    });

    const answer = await (logout as ReturnType<typeof post>);
    expect(answer.statusCode).toBe(200);
    expect(body(answer).data).toEqual({ revokedSessions: 0 });
    expect(log.filter((line) => line.msg === 'could not record a security event')).toEqual([]);
  });

  it('finalizes nothing while Redis refuses the session keys, and all at the next run', async () => {
    const clock = manualClock(new Date(START));
    const { app } = await gateway(await deployment(), clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' });
    const jo = await signIn(app, 'jo@example.com');
    expect((await requestDeletion(app, jo.accessToken)).statusCode).toBe(200);
    clock.advance(GRACE);

    const store = createActiveSessionStore(app.redis);
    const refusing = sweeper(app, clock, {
      ...store,
      remove: () => Promise.reject(new DependencyUnavailableError('redis')),
    });
    await expect(refusing.finalizeDue(10)).rejects.toThrow(DependencyUnavailableError);
    expect((await userRow(app, jo.user._id)).accountDeletionStatus).toBe('scheduled');
    expect((await me(app, jo.accessToken)).statusCode).toBe(200);

    expect(await sweeper(app, clock).finalizeDue(10)).toEqual([jo.user._id]);
    expect(await store.holder(sidOf(jo.accessToken))).toBeNull();
  });

  it('takes nothing more from a token that outlived the erasure: no profile change, no trace of a logout', async () => {
    const clock = manualClock(new Date(START));
    const { app } = await gateway(await deployment(), clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' });
    const kay = await signIn(app, 'kay@example.com');
    expect((await requestDeletion(app, kay.accessToken)).statusCode).toBe(200);
    clock.advance(GRACE);
    // The session's key outlives the sweep, as when a request authenticated just before the sweep
    // deleted it waits on the account's row lock until the sweep commits.
    const store = createActiveSessionStore(app.redis);
    const sweep = sweeper(app, clock, {
      ...store,
      async remove() {
        return 0;
      },
    });
    expect(await sweep.finalizeDue(10)).toEqual([kay.user._id]);
    const erasedAt = clock.now();
    clock.advance(1);

    const changed = await app.inject({
      method: 'PATCH',
      url: ME,
      headers: { ...bearer(kay.accessToken), ...phone },
      payload: { name: 'Kay', bio: 'Call me at +1 555 0100' },
    });
    expect(changed.statusCode).toBe(401);
    expect(await userRow(app, kay.user._id)).toMatchObject({ name: null, bio: null });
    const logout = await app.inject({
      method: 'POST',
      url: '/api/v1/auth/logout',
      headers: { ...bearer(kay.accessToken), ...phone },
      payload: {},
    });
    expect(body(logout).data).toEqual({ revokedSessions: 0 });
    // Nothing written after the erasure: no event, so no address or browser of the token's holder.
    const after = (await eventsOf(app, kay.user._id)).filter(({ createdAt }) => createdAt > erasedAt);
    expect(after).toEqual([]);
  });

  it('does not deadlock with a refresh that rotates a token of the account while the sweep runs', async () => {
    const clock = manualClock(new Date(START));
    const { app } = await gateway(await deployment(), clock, {
      ACCOUNT_DELETION_SWEEP_INTERVAL: '3600',
    });
    const mary = await signIn(app, 'mary@example.com');
    expect((await requestDeletion(app, mary.accessToken)).statusCode).toBe(200);
    clock.advance(GRACE);
    const [session] = await sessionsOf(app, mary.user._id);

    // A rotation's locks, in its order, with the sweep in between: the refresh token's row, then (the
    // sweep waiting on a lock meanwhile) the session's row.
    const { sweeping } = await app.db.transaction().execute(async (rotation) => {
      await rotation
        .updateTable('refreshTokens')
        .set({ rotatedAt: clock.now() })
        .where('sessionId', '=', session?.id ?? '')
        .execute();
      const sweep = sweeper(app, clock).finalizeDue(10);
      await eventually(waitingOnLocks(app.db, 1), 'the sweep to wait on a lock');
      await rotation
        .updateTable('sessions')
        .set({ lastUsedAt: clock.now() })
        .where('id', '=', session?.id ?? '')
        .execute();
      // Not awaited here: the sweep waits for this transaction's commit.
      return { sweeping: sweep };
    });

    expect(await sweeping).toEqual([mary.user._id]);
    expect((await sessionsOf(app, mary.user._id))[0]).toMatchObject({ endReason: 'account_deleted' });
    expect((await refresh(app, mary.refreshToken)).statusCode).toBe(401);
  });

  /** A gateway whose statements may run 1 s, and the account of `email`, whose deletion is due. */
  async function dueUnderShortTimeout(email: string) {
    const clock = manualClock(new Date(START));
    const { app } = await gateway(await deployment(), clock, {
      ACCOUNT_DELETION_SWEEP_INTERVAL: '3600',
      DATABASE_STATEMENT_TIMEOUT: '1',
    });
    const user = await signIn(app, email);
    expect((await requestDeletion(app, user.accessToken)).statusCode).toBe(200);
    clock.advance(GRACE);
    return { app, clock, user };
  }

  /** Locks a user's security events in `holder`, as a transaction the erasure must wait for. */
  const lockEventsOf = (holder: Transaction<Database>, userId: string) =>
    holder.selectFrom('securityEvents').select('id').where('userId', '=', userId).forUpdate().execute();

  it('is not cut short by DATABASE_STATEMENT_TIMEOUT: an erasure that waits longer still happens', async () => {
    const { app, clock, user: ann } = await dueUnderShortTimeout('ann@example.com');

    // Her events held by another transaction for longer than a request's statement may run.
    const { sweeping } = await app.db.transaction().execute(async (holder) => {
      await lockEventsOf(holder, ann.user._id);
      const sweep = sweeper(app, clock).finalizeDue(10);
      await eventually(
        // Each look on a connection of its own: in the holder's transaction, Postgres would show the
        // same snapshot of the sessions at every look.
        waitingOnLocks(app.db, 1, 1500),
        'the sweep to wait on a lock for longer than the statement timeout',
      );
      return { sweeping: sweep };
    });

    expect(await sweeping).toEqual([ann.user._id]);
    expect((await userRow(app, ann.user._id)).accountDeletionStatus).toBe('finalized');
  });

  it("bounds a sign-in's erasure by DATABASE_STATEMENT_TIMEOUT, as any request: 503, and the same code signs in once it can", async () => {
    const { app, user: bea } = await dueUnderShortTimeout('bea@example.com');
    const { code } = body(await post(app, '/api/v1/auth/send-otp-email', { email: 'bea@example.com' })).data;
    const verify = () => post(app, '/api/v1/auth/verify-otp-email', { email: 'bea@example.com', code });

    // Her events held by another transaction for longer than a request's statement may run.
    const release = await holding(app.db, (holder) => lockEventsOf(holder, bea.user._id));
    let refused: Awaited<ReturnType<typeof verify>>;
    try {
      refused = await verify();
    } finally {
      await release();
    }
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBeDefined();
    expect((await userRow(app, bea.user._id)).accountDeletionStatus).toBe('scheduled');

    const signedIn = await verify();
    expect(signedIn.statusCode).toBe(200);
    expect(body(signedIn).data.user._id).not.toBe(bea.user._id);
    expect((await userRow(app, bea.user._id)).accountDeletionStatus).toBe('finalized');
  });

  it('leaves no address or user agent on the account from a wrong code sent while it was erased', async () => {
    const clock = manualClock(new Date(START));
    const { app } = await gateway(await deployment(), clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' });
    const email = 'bea@example.com';
    const bea = await signIn(app, email);
    expect((await requestDeletion(app, bea.accessToken)).statusCode).toBe(200);
    const { code } = body(await post(app, '/api/v1/auth/send-otp-email', { email })).data;
    clock.advance(GRACE);

    // The sweep held up halfway (her session's row taken by another transaction), a wrong code
    // for her address arrives: its event must not land on the erased account with where it came from.
    const { sweeping, guessing } = await app.db.transaction().execute(async (holder) => {
      await holder
        .selectFrom('sessions')
        .select('id')
        .where('userId', '=', bea.user._id)
        .forUpdate()
        .execute();
      const sweep = sweeper(app, clock).finalizeDue(10);
      await eventually(waitingOnLocks(app.db, 1), 'the sweep to wait for her session');
      const wrong = code === '0000' ? '1111' : '0000';
      const guess = post(
        app,
        '/api/v1/auth/verify-otp-email',
        { email, code: wrong },
        { 'user-agent': 'Guesser/1' },
      );
      await eventually(waitingOnLocks(app.db, 2), "the wrong code's event to wait for the sweep");
      return { sweeping: sweep, guessing: guess };
    });

    expect(await sweeping).toEqual([bea.user._id]);
    expect((await guessing).statusCode).toBe(400);
    const traces = await app.db
      .selectFrom('securityEvents')
      .select(['userId', 'ipAddress', 'userAgent'])
      .where('userAgent', '=', 'Guesser/1')
      .execute();
    expect(traces).toEqual([{ userId: null, ipAddress: expect.any(String), userAgent: 'Guesser/1' }]);
  });

  it('happens exactly once when several gateways sweep at the same time', async () => {
    const clock = manualClock(new Date(START));
    const shared = await deployment();
    const { app } = await gateway(shared, clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' });
    const users = await Promise.all(
      Array.from({ length: 40 }, (_, i) => signIn(app, `crowd-${i}@example.com`)),
    );
    for (const user of users) expect((await requestDeletion(app, user.accessToken)).statusCode).toBe(200);
    clock.advance(GRACE);

    // Three processes start together, each sweeping at once.
    const sweepers = await Promise.all([1, 2, 3].map(() => gateway(shared, clock)));
    await Promise.all(sweepers.map(({ app: sweeper }) => sweeper.ready()));
    for (const user of users) await finalized(app, user.user._id);

    const finalizedEvents = await app.db
      .selectFrom('securityEvents')
      .select('userId')
      .where('type', '=', 'deletion_finalized')
      .execute();
    expect(finalizedEvents.map((event) => event.userId).sort()).toEqual(
      users.map((user) => user.user._id).sort(),
    );
    // Between them, the sweepers finalized each account once.
    const finalizedBy = sweepers.flatMap(({ log }) =>
      log.filter((line) => line.msg === 'accounts deleted').flatMap((line) => line.userIds as string[]),
    );
    expect(finalizedBy.sort()).toEqual(users.map((user) => user.user._id).sort());
  });
});

describe('emails', () => {
  const clock = manualClock(new Date(START));
  const ACCOUNT_PAGE = 'https://auth.tessera.test/account/';
  let shared: Deployment;
  let sink: SmtpSink;
  let transport: MailTransport;
  let mailWorker: ReturnType<typeof createMailWorker>;
  let app: App;
  let log: Log;

  beforeAll(async () => {
    shared = await deployment();
    sink = await startSmtpSink();
    const config = loadMailerConfig({
      APP_ENV: 'test',
      REDIS_URL: shared.redis.url,
      BULLMQ_PREFIX: shared.redis.bullmqPrefix,
      SMTP_URL: sink.url,
      MAIL_FROM: 'Tessera <no-reply@tessera.test>',
      MAIL_ACCOUNT_URL: ACCOUNT_PAGE,
    });
    transport = createTransport(config);
    // The mailer reads the same clock as the gateway, so no email is outdated by the time it is sent.
    mailWorker = createMailWorker({ config, transport, logger: pino({ level: 'silent' }), now: clock.now });
    ({ app, log } = await gateway(shared, clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' }));
  });
  afterAll(async () => {
    await mailWorker?.close();
    transport?.close();
    await sink?.close();
  });

  const mailTo = (address: string, subject: string) =>
    sink.waitFor((mail) => mail.to.includes(address) && mail.subject === subject);
  /** Every number in a mail: only those of its date may be there, never a code. */
  const numbersIn = (mail: ReceivedMail) => numbersOf(`${mail.subject} ${mail.text}`);

  it('tells the date of the deletion, and how and where to keep the account, by a real mailer over SMTP', async () => {
    const hana = await signIn(app, 'hana@example.com');
    const response = await requestDeletion(app, hana.accessToken);
    expect(response.statusCode).toBe(200);
    const date = longDate(body(response).data.accountDeletionScheduledFor);
    expect(date).toBe(longDate(at(clock.now().toISOString(), GRACE)));

    const mail = await mailTo('hana@example.com', `Your Tessera account will be deleted on ${date}`);
    expect(mail.from).toBe('no-reply@tessera.test');
    expect(mail.text).toContain(`Your Tessera account is scheduled for deletion on ${date}.`);
    // Half an hour's grace: no whole day is ahead in every time zone, so no day is named (the mailer's
    // own tests show the day it names for a longer grace).
    expect(mail.text).toContain(
      `Sign in at ${ACCOUNT_PAGE} and cancel the deletion before then, and your account stays as it is.`,
    );
    expect(mail.html).toContain(date);
    expect(mail.html).toContain(`<a href="${ACCOUNT_PAGE}"`);
    expect(numbersIn(mail)).toEqual(numbersOf(date));
    for (const secret of [hana.accessToken, hana.refreshToken]) {
      expect(mail.text).not.toContain(secret);
      expect(mail.html).not.toContain(secret);
    }
  });

  it('confirms a cancellation', async () => {
    const ivan = await signIn(app, 'ivan@example.com');
    await requestDeletion(app, ivan.accessToken);
    clock.advance(10 * 60);
    const response = await cancelDeletion(app, ivan.accessToken);
    expect(response.statusCode).toBe(200);
    const date = longDate(body(response).data.accountDeletionCancelledAt);

    const mail = await mailTo('ivan@example.com', 'Your Tessera account will not be deleted');
    expect(mail.text).toContain(
      `Your Tessera account will not be deleted: its deletion was cancelled on ${date}.`,
    );
    expect(mail.text).toContain('Your account stays as it is');
    expect(mail.text).toContain(`If you did not cancel it, sign in at ${ACCOUNT_PAGE} and sign out`);
    expect(numbersIn(mail)).toEqual(numbersOf(date));
    expect(mail.text).not.toContain(ivan.refreshToken);
  });

  it('queues one job per transition, under an id of its own that a repeated enqueue reuses; only the newest is sent when they wait together', async () => {
    const jules = await signIn(app, 'jules@example.com');
    await mailTo('jules@example.com', `${jules.code} is your Tessera sign-in code`);
    await mailWorker.worker.pause();
    const requestedAt = clock.now();
    const cancelledAt = new Date(requestedAt.getTime() + 1000);
    const requestedAgainAt = new Date(cancelledAt.getTime() + 600_000);
    try {
      await requestDeletion(app, jules.accessToken);
      clock.advance(1);
      await cancelDeletion(app, jules.accessToken);
      clock.advance(600);
      await requestDeletion(app, jules.accessToken);

      const waiting = await app.mailQueue.getWaiting();
      expect(waiting.map((job) => [job.name, job.id]).sort()).toEqual(
        [
          [DELETION_SCHEDULED_JOB, deletionScheduledJobId(jules.user._id, requestedAt)],
          [DELETION_CANCELLED_JOB, deletionCancelledJobId(jules.user._id, cancelledAt)],
          [DELETION_SCHEDULED_JOB, deletionScheduledJobId(jules.user._id, requestedAgainAt)],
        ].sort(),
      );
      for (const job of waiting)
        expect(job.opts).toMatchObject({ backoff: { type: EMAIL_BACKOFF }, removeOnComplete: true });
      // The same job queued again, as a retried enqueue would: still one job.
      const [first] = waiting;
      if (first) await app.mailQueue.add(first.name, first.data, { ...first.opts, jobId: first.id });
      expect(await app.mailQueue.getWaitingCount()).toBe(3);
    } finally {
      await mailWorker.worker.resume();
    }
    // Queued together (as through an SMTP outage), the notices that the next transition outdated are
    // not sent: they would arrive with the newest and contradict it. The sign-in code, and the newest.
    await eventually(
      async () => ((await app.mailQueue.getWaitingCount()) === 0 ? true : undefined),
      'the queue to empty',
    );
    await mailTo(
      'jules@example.com',
      `Your Tessera account will be deleted on ${longDate(at(requestedAgainAt.toISOString(), GRACE))}`,
    );
    await eventually(
      async () => ((await app.mailQueue.getActiveCount()) === 0 ? true : undefined),
      'the last job',
    );
    expect(
      sink.messages.filter((mail) => mail.to.includes('jules@example.com')).map((mail) => mail.subject),
    ).toEqual([
      `${jules.code} is your Tessera sign-in code`,
      `Your Tessera account will be deleted on ${longDate(at(requestedAgainAt.toISOString(), GRACE))}`,
    ]);
  });

  it("keeps two days' notices on record for an account, not every one: a deletion asked for and cancelled again and again", async () => {
    const otto = await signIn(app, 'otto@example.com');
    const key = noticesKey(app.mailQueue.opts.prefix ?? '', otto.user._id);
    const records = () => app.mailQueueRedis.hgetall(key);
    // The records expire by the Redis server's clock, which a test cannot move: they move back instead.
    const age = async (ms: number) => {
      const { newest: _, ...each } = await records();
      for (const [jobId, expires] of Object.entries(each))
        await app.mailQueueRedis.hset(key, jobId, String(Number(expires) - ms));
    };
    await requestDeletion(app, otto.accessToken);
    clock.advance(1);
    await cancelDeletion(app, otto.accessToken);
    expect(Object.keys(await records())).toHaveLength(3);

    // A day and a minute on, both notices are past their deadlines; their records stay a day more,
    // for a gateway whose clock ran ahead of the Redis server's when it queued them.
    await age(NOTICE_RETRY_WINDOW_MS + 61_000);
    clock.advance(601);
    await requestDeletion(app, otto.accessToken);
    expect(Object.keys(await records())).toHaveLength(4);

    // Another day on, they go; the third notice's record stays.
    await age(NOTICE_RETRY_WINDOW_MS + 61_000);
    clock.advance(1);
    await cancelDeletion(app, otto.accessToken);
    const { newest = '', ...left } = await records();
    expect(Object.keys(left)).toHaveLength(2);
    expect(left).toHaveProperty(newest);
  });

  it('sends no notice of a deletion cancelled while the notice waited for the mail server, whatever the clocks of the gateways', async () => {
    const mona = await signIn(app, 'mona@example.com');
    await mailTo('mona@example.com', `${mona.code} is your Tessera sign-in code`);
    // The request is taken by a gateway whose clock runs five minutes ahead of the one that cancels.
    const aheadClock = { now: () => new Date(clock.now().getTime() + 5 * 60_000) };
    const ahead = await gateway(shared, aheadClock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' });
    const jobId = deletionScheduledJobId(mona.user._id, aheadClock.now());
    const { worker } = mailWorker;
    const refused = new Promise((resolve) => worker.on('failed', (job) => job?.id === jobId && resolve(job)));
    const ended = new Promise((resolve) =>
      worker.on('completed', (job, result) => job.id === jobId && resolve(result)),
    );
    // The mail server refuses for now: the notice waits for its retry, a second later.
    sink.failNext(1);
    await requestDeletion(ahead.app, mona.accessToken);
    await refused;
    // The retry held until the cancellation is in, however long this machine takes over it.
    await worker.pause();
    try {
      clock.advance(60);
      await cancelDeletion(app, mona.accessToken);
    } finally {
      await worker.resume();
    }

    await mailTo('mona@example.com', 'Your Tessera account will not be deleted');
    expect(await ended).toEqual({ skipped: 'replaced' });
    expect(sink.messages.filter((mail) => mail.to.includes('mona@example.com'))).toHaveLength(2);
  });

  it('still sends a notice queued by a gateway that records no newest notice (one of an earlier version)', async () => {
    const nina = await signIn(app, 'nina@example.com');
    await requestDeletion(app, nina.accessToken);
    await mailTo(
      'nina@example.com',
      `Your Tessera account will be deleted on ${longDate(at(clock.now().toISOString(), GRACE))}`,
    );
    clock.advance(60);
    // During a rolling deploy, an earlier gateway takes the cancellation: it queues its notice alone.
    const cancelledAt = clock.now();
    await app.mailQueue.add(
      DELETION_CANCELLED_JOB,
      { to: 'nina@example.com', cancelledAt: cancelledAt.toISOString() },
      { ...EMAIL_JOB_OPTIONS, jobId: deletionCancelledJobId(nina.user._id, cancelledAt) },
    );
    await mailTo('nina@example.com', 'Your Tessera account will not be deleted');
  });

  it('keeps the transition when the email cannot be queued, and logs it by user id', async () => {
    const broken = await gateway(shared, clock, { ACCOUNT_DELETION_SWEEP_INTERVAL: '3600' });
    const kim = await signIn(broken.app, 'kim@example.com');
    // The queue's own Redis connection is gone (the app's is not): every enqueue fails from now on.
    (broken.app.mailQueue.opts.connection as Redis).disconnect();

    const response = await requestDeletion(broken.app, kim.accessToken);
    expect(response.statusCode).toBe(200);
    expect(body(response).data.accountDeletionStatus).toBe('scheduled');
    expect((await userRow(broken.app, kim.user._id)).accountDeletionStatus).toBe('scheduled');
    expect(broken.log).toContainEqual(
      expect.objectContaining({
        level: 50,
        msg: 'could not queue the account deletion email',
        userId: kim.user._id,
      }),
    );
    expect(JSON.stringify(broken.log)).not.toContain('kim@example.com');
  });

  it('logs requests, cancellations and erasures by user id, never by address or name', async () => {
    const from = log.length;
    const lena = await signIn(app, 'lena@example.com');
    const id = lena.user._id;
    await app.db.updateTable('users').set(LIVED_IN_PROFILE).where('id', '=', id).execute();
    expect((await requestDeletion(app, lena.accessToken)).statusCode).toBe(200);
    clock.advance(60);
    expect((await cancelDeletion(app, lena.accessToken)).statusCode).toBe(200);
    clock.advance(600);
    expect((await requestDeletion(app, lena.accessToken)).statusCode).toBe(200);
    // Sent before the date passes: the mailer drops notices outdated by its clock (and, the notices
    // of the first request and the cancellation, by the next transition if they were still queued).
    const requestedAgainAt = clock.now().toISOString();
    await mailTo(
      'lena@example.com',
      `Your Tessera account will be deleted on ${longDate(at(requestedAgainAt, GRACE))}`,
    );
    clock.advance(GRACE);
    // The accounts of the tests before are due as well.
    expect(await sweeper(app, clock).finalizeDue(100)).toContain(id);

    const lines = log.slice(from);
    for (const msg of ['account deletion scheduled', 'account deletion cancelled'])
      expect(lines).toContainEqual(expect.objectContaining({ msg, userId: id }));
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'accounts deleted', userIds: expect.arrayContaining([id]) }),
    );
    const logged = JSON.stringify(lines);
    for (const personal of ['lena@', 'Ayşe', 'Yılmaz', 'ayse.yilmaz', '5321234567'])
      expect(logged).not.toContain(personal);
  });
});
