import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import {
  bearer,
  body,
  type Json,
  manualClock,
  post,
  sidOf,
  signIn,
  startGateway,
  type TestGateway,
} from './helpers.ts';

const ME = '/api/v1/users/me';
const REGISTRATION = '/api/v1/users/me/registration';
const EVENTS = '/api/v1/users/me/security-events';

const clock = manualClock(new Date('2026-11-23T10:00:00.000Z'));
/** Seconds; the tests wait it out with the same access tokens, which live an hour. */
const COOLDOWN = 600;
const logLines: string[] = [];
let gateway: TestGateway;
beforeAll(async () => {
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(chunk.toString());
      done();
    },
  });
  gateway = await startGateway(
    { LOG_LEVEL: 'info', USERNAME_CHANGE_COOLDOWN: String(COOLDOWN) },
    { clock, logStream },
  );
});
afterAll(() => gateway.close());

const patch = (accessToken: string, payload: unknown) =>
  gateway.app.inject({ method: 'PATCH', url: ME, payload: payload as object, headers: bearer(accessToken) });
const get = (accessToken: string, url: string) => gateway.app.inject({ url, headers: bearer(accessToken) });

const COMPLETE = {
  name: 'Ada',
  surname: 'Lovelace',
  privacyPolicyAccepted: true,
  privacyPolicyVersion: '1.0.0',
  termsOfUseAccepted: true,
  termsOfUseVersion: '1.0.0',
};

describe('GET /api/v1/users/me', () => {
  it("answers the caller's User with every field of the specification, and 401 without a token", async () => {
    const { accessToken, user } = await signIn(gateway.app, 'reader@example.com');
    const me = await get(accessToken, ME);
    expect(me.statusCode).toBe(200);
    expect(body(me).data).toEqual(user);
    expect(Object.keys(body(me).data)).toHaveLength(43);
    expect((await gateway.app.inject({ url: ME })).statusCode).toBe(401);
  });

  it('answers with a value stored outside its documented list, or a time of -infinity, as it is, not a 500 (an import, an edit by hand)', async () => {
    // As it serves in production: no check of its answers against the document.
    const served = await buildApp(gateway.config, { clock });
    try {
      const { user } = await signIn(served, 'imported@example.com');
      await gateway.app.db
        .updateTable('users')
        .set({ gender: 'Female', availabilityStatus: 'dnd', birthDate: new Date('+010000-01-01T00:00:00Z') })
        .where('id', '=', user._id)
        .execute();
      await sql`update users set last_username_change_date = '-infinity' where id = ${user._id}`.execute(
        gateway.app.db,
      );
      const again = await signIn(served, 'imported@example.com');
      expect(again.user).toMatchObject({ gender: 'Female', availabilityStatus: 'dnd' });
      const me = await served.inject({ url: ME, headers: bearer(again.accessToken) });
      expect(me.statusCode).toBe(200);
      expect(body(me).data).toMatchObject({
        gender: 'Female',
        availabilityStatus: 'dnd',
        birthDate: '+010000-01-01T00:00:00.000Z',
        lastUsernameChangeDate: '-271821-04-20T00:00:00.000Z',
      });
      const renamed = await served.inject({
        method: 'PATCH',
        url: ME,
        headers: bearer(again.accessToken),
        payload: { username: 'imported' },
      });
      expect(renamed.statusCode).toBe(200);
    } finally {
      await served.close();
    }
  });
});

describe('registration', () => {
  it('lists what is missing, completes once, and the login result says so from then on', async () => {
    const { accessToken, isRegistrationComplete } = await signIn(gateway.app, 'newcomer@example.com');
    expect(isRegistrationComplete).toBe(false);
    expect(body(await get(accessToken, REGISTRATION)).data).toEqual({
      isRegistrationComplete: false,
      missing: ['name', 'surname', 'username', 'privacyPolicy', 'termsOfUse'],
      policies: { privacyPolicyVersion: '1.0.0', termsOfUseVersion: '1.0.0', consentFormVersion: null },
    });

    const partial = await patch(accessToken, { name: '  Ada  ', surname: 'Lovelace' });
    expect(partial.statusCode).toBe(200);
    expect(body(partial).data).toMatchObject({
      name: 'Ada',
      surname: 'Lovelace',
      isRegistrationComplete: false,
    });
    expect(body(await get(accessToken, REGISTRATION)).data.missing).toEqual([
      'username',
      'privacyPolicy',
      'termsOfUse',
    ]);

    const done = await patch(accessToken, { ...COMPLETE, username: 'Ada.Lovelace' });
    expect(done.statusCode).toBe(200);
    expect(body(done).data).toMatchObject({ username: 'ada.lovelace', isRegistrationComplete: true });
    expect(body(await get(accessToken, REGISTRATION)).data).toMatchObject({
      isRegistrationComplete: true,
      missing: [],
    });
    expect((await signIn(gateway.app, 'newcomer@example.com')).isRegistrationComplete).toBe(true);

    // Once complete, the required fields cannot be cleared.
    const cleared = await patch(accessToken, { name: null });
    expect(cleared.statusCode).toBe(400);
    expect(body(cleared).errors[1]).toMatch(/^name /);
  });

  it('stores signupSource and signupCampaign only from the sign-in that creates the user', async () => {
    const email = 'campaign@example.com';
    const first = body(await post(gateway.app, '/api/v1/auth/send-otp-email', { email })).data;
    const created = await post(gateway.app, '/api/v1/auth/verify-otp-email', {
      email,
      code: first.code,
      signupSource: 'ios-app',
      signupCampaign: 'winter_2026',
    });
    expect(body(created).data.user).toMatchObject({ signupSource: 'ios-app', signupCampaign: 'winter_2026' });
    const again = body(await post(gateway.app, '/api/v1/auth/send-otp-email', { email })).data;
    const later = await post(gateway.app, '/api/v1/auth/verify-otp-email', {
      email,
      code: again.code,
      signupSource: 'web',
    });
    expect(body(later).data.user).toMatchObject({ signupSource: 'ios-app', signupCampaign: 'winter_2026' });
    const bad = await post(gateway.app, '/api/v1/auth/verify-otp-email', {
      email,
      code: '0000',
      signupSource: 'a b',
    });
    expect(bad.statusCode).toBe(400);
  });

  it('after a policy version bump the login result asks again, while the stored flag stays true', async () => {
    const email = 'policy@example.com';
    const { accessToken } = await signIn(gateway.app, email);
    expect((await patch(accessToken, { ...COMPLETE, username: 'policy_reader' })).statusCode).toBe(200);

    // A restart with a new privacy policy, on the same database and Redis.
    const bumped = await startGateway({
      DATABASE_URL: gateway.config.database.url,
      REDIS_URL: gateway.config.redis.url,
      REDIS_KEY_PREFIX: gateway.config.redis.keyPrefix,
      BULLMQ_PREFIX: gateway.config.mail.queuePrefix,
      OTP_SECRET: gateway.config.otp.secret,
      PRIVACY_POLICY_VERSION: '2.0.0',
    });
    try {
      const login = await signIn(bumped.app, email);
      expect(login.isRegistrationComplete).toBe(false);
      expect(login.user.isRegistrationComplete).toBe(true);
      expect(
        body(await bumped.app.inject({ url: REGISTRATION, headers: bearer(login.accessToken) })).data,
      ).toEqual({
        isRegistrationComplete: false,
        missing: ['privacyPolicy'],
        policies: { privacyPolicyVersion: '2.0.0', termsOfUseVersion: '1.0.0', consentFormVersion: null },
      });
      // Accepting the old version is refused; the current one completes it again.
      const old = await bumped.app.inject({
        method: 'PATCH',
        url: ME,
        payload: { privacyPolicyAccepted: true, privacyPolicyVersion: '1.0.0' },
        headers: bearer(login.accessToken),
      });
      expect(old.statusCode).toBe(400);
      const current = await bumped.app.inject({
        method: 'PATCH',
        url: ME,
        payload: { privacyPolicyAccepted: true, privacyPolicyVersion: '2.0.0' },
        headers: bearer(login.accessToken),
      });
      expect(current.statusCode).toBe(200);
      expect((await signIn(bumped.app, email)).isRegistrationComplete).toBe(true);
    } finally {
      await bumped.close();
    }
  });
});

describe('PATCH /api/v1/users/me', () => {
  it('answers every failing field at once, each detail naming its field', async () => {
    const { accessToken } = await signIn(gateway.app, 'typo@example.com');
    const response = await patch(accessToken, {
      bio: 'x'.repeat(501),
      gender: 'robot',
      timezone: 'Mars/Olympus_Mons',
      instagram: 'https://instagram.com/ada',
      email: 'other@example.com',
      nmae: 'Ada',
      name: 42,
    });
    expect(response.statusCode).toBe(400);
    const [first, ...details] = body(response).errors as string[];
    expect(first).toBe('Validation failed');
    for (const field of ['bio', 'gender', 'timezone', 'instagram', 'email', 'nmae', 'name'])
      expect(
        details.some((detail) => detail.startsWith(field)),
        field,
      ).toBe(true);
    // Nothing was changed by a refused update.
    expect(body(await get(accessToken, ME)).data).toMatchObject({ bio: null, gender: null, timezone: null });
  });

  it('answers a body that is no JSON object as every route does, VALIDATION_FAILED, not as a field breaking a rule', async () => {
    const { accessToken } = await signIn(gateway.app, 'shape@example.com');
    for (const payload of ['null', '[]', '42', '"name"', 'true']) {
      const response = await gateway.app.inject({
        method: 'PATCH',
        url: ME,
        headers: { ...bearer(accessToken), 'content-type': 'application/json' },
        payload,
      });
      expect(response.statusCode, payload).toBe(400);
      expect(response.headers['tessera-error-code'], payload).toBe('VALIDATION_FAILED');
      expect(body(response).errors, payload).toEqual(['Validation failed', 'body must be a JSON object']);
    }
  });

  it('sets, trims, normalizes and clears optional fields', async () => {
    const { accessToken } = await signIn(gateway.app, 'profile@example.com');
    const updated = await patch(accessToken, {
      bio: '  Engines and poetry  ',
      timezone: 'Europe/Istanbul',
      instagram: '@ada_l',
      interests: ['math', 'Math', ' poetry '],
      countryCode: '90',
      phoneNumber: '5551234567',
      birthDate: '1990-12-10T00:00:00.000Z',
      gender: 'female',
      availabilityStatus: 'busy',
      profilePhoto: 'https://cdn.example.com/ada.png',
    });
    expect(updated.statusCode).toBe(200);
    expect(body(updated).data).toMatchObject({
      bio: 'Engines and poetry',
      timezone: 'Europe/Istanbul',
      instagram: 'ada_l',
      interests: ['math', 'poetry'],
      birthDate: '1990-12-10T00:00:00.000Z',
    });
    const cleared = await patch(accessToken, { bio: null, instagram: null, interests: null });
    expect(body(cleared).data).toMatchObject({
      bio: null,
      instagram: null,
      interests: [],
      timezone: 'Europe/Istanbul',
    });
  });

  it('refuses control characters (a NUL byte Postgres cannot store) with a 400, keeping line breaks in a bio', async () => {
    const { accessToken } = await signIn(gateway.app, 'control@example.com');
    const refused = await patch(accessToken, {
      bio: 'a\u0000b',
      expertise: 'bells\u0007',
      interests: ['ok', 'x\u0000'],
      profilePhoto: 'https://cdn.example.com/\u0000.png',
    });
    expect(refused.statusCode).toBe(400);
    const details = (body(refused).errors as string[]).slice(1);
    for (const field of ['bio', 'expertise', 'interests'])
      expect(
        details.some((detail) => detail.startsWith(field) && detail.includes('control characters')),
        field,
      ).toBe(true);
    expect(details).toContain('profilePhoto must be an https:// URL');

    const lines = await patch(accessToken, { bio: 'Line one\nLine two\r\n\tindented' });
    expect(lines.statusCode).toBe(200);
    expect(body(lines).data).toMatchObject({ bio: 'Line one\nLine two\r\n\tindented' });
  });

  it('lets two concurrent claims of one username, whatever its case, have exactly one winner', async () => {
    const people = await Promise.all(
      ['race1@example.com', 'race2@example.com'].map((email) => signIn(gateway.app, email)),
    );
    for (let round = 0; round < 5; round++) {
      const [a, b] = await Promise.all([
        patch(people[0]?.accessToken ?? '', { username: `Racer${round}` }),
        patch(people[1]?.accessToken ?? '', { username: `racer${round}` }),
      ]);
      expect([a.statusCode, b.statusCode].sort(), `round ${round}`).toEqual([200, 409]);
      const loser = a.statusCode === 409 ? a : b;
      expect(body(loser).errors).toEqual([
        'Resource already exists or cannot be changed in its current state',
        'username is taken',
      ]);
      clock.advance(COOLDOWN + 1);
    }
  });

  it('allows one username change per USERNAME_CHANGE_COOLDOWN and says when the next one is possible', async () => {
    const { accessToken } = await signIn(gateway.app, 'renamer@example.com');
    expect((await patch(accessToken, { username: 'first_name' })).statusCode).toBe(200);
    expect((await patch(accessToken, { username: 'first_name' })).statusCode).toBe(200);
    const soon = await patch(accessToken, { username: 'second_name' });
    expect(soon.statusCode).toBe(409);
    const allowedAt = new Date(clock.now().getTime() + COOLDOWN * 1000).toISOString();
    expect(body(soon).errors[1]).toContain(allowedAt);
    clock.advance(COOLDOWN);
    const later = await patch(accessToken, { username: 'second_name' });
    expect(body(later).data).toMatchObject({
      username: 'second_name',
      lastUsernameChangeDate: clock.now().toISOString(),
    });
  });

  it('never writes profile data to the logs', async () => {
    const { accessToken } = await signIn(gateway.app, 'private.person@example.com');
    await patch(accessToken, { name: 'Zebulon', surname: 'Quixotic', bio: 'Secret hobby: xylophones' });
    await patch(accessToken, { name: 'Zebulon', bio: 'x'.repeat(600) });
    const output = logLines.join('');
    for (const secret of ['Zebulon', 'Quixotic', 'xylophones', 'private.person@example.com'])
      expect(output).not.toContain(secret);
  });
});

describe('GET /api/v1/users/me/security-events', () => {
  it("lists the caller's own events newest first, paginated, with what each one was", async () => {
    const email = 'audited@example.com';
    const { accessToken } = await signIn(gateway.app, email, { 'user-agent': 'audit-test' });
    clock.advance(1);
    await patch(accessToken, { ...COMPLETE, username: 'audited' });
    clock.advance(1);
    await patch(accessToken, { bio: 'hello' });
    clock.advance(1);
    const other = await signIn(gateway.app, email);
    // Someone else signs in last: their event would be the newest, were it listed.
    clock.advance(1);
    const stranger = await signIn(gateway.app, 'stranger@example.com');

    const first = body(await get(accessToken, `${EVENTS}?limit=2`)).data;
    expect(first.pagination).toMatchObject({
      currentPage: 1,
      itemsPerPage: 2,
      hasNextPage: true,
      hasPrevPage: false,
    });
    const walked: Json[] = [...first.list];
    for (let page = 2; page <= first.pagination.totalPages; page++)
      walked.push(...body(await get(accessToken, `${EVENTS}?limit=2&page=${page}`)).data.list);
    expect(walked).toHaveLength(first.pagination.totalItems);
    expect(new Set(walked.map((event) => event._id)).size).toBe(walked.length);
    const types = walked.map((event) => event.type);
    expect(types[0]).toBe('sign_in');
    expect(types.at(-1)).toBe('sign_in');
    expect(types).toEqual(expect.arrayContaining(['username_changed', 'policy_accepted', 'profile_updated']));
    expect(walked.at(-1)).toMatchObject({ userAgent: 'audit-test', ipAddress: '127.0.0.1' });
    expect(walked[0]?.sessionId).toBe(sidOf(other.accessToken));
    // Only this user's events.
    expect(walked.map((event) => event.sessionId)).not.toContain(sidOf(stranger.accessToken));

    const badPage = await get(accessToken, `${EVENTS}?page=0`);
    expect(badPage.statusCode).toBe(400);
    expect(body(badPage).errors[1]).toContain('page');
  });
});
