import { Ajv, type Options } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { LAST_TIME } from '../../calendar.ts';
import {
  AVAILABILITY_STATUSES,
  type CurrentPolicies,
  GENDERS,
  type ProfileContext,
  type ProfileSubject,
  planProfileUpdate,
  registrationStatus,
  UserPatch,
} from './profile.ts';

const NOW = new Date('2026-11-22T10:00:00.000Z');
const POLICIES: CurrentPolicies = {
  privacyPolicyVersion: '1.0.0',
  termsOfUseVersion: '1.1.0',
  consentFormVersion: '2.0.0',
};

/** A user just created by their first sign-in. */
const NEW_USER: ProfileSubject = {
  name: null,
  surname: null,
  username: null,
  lastUsernameChangeDate: null,
  isRegistrationComplete: false,
  countryCode: null,
  phoneNumber: null,
  birthDate: null,
  gender: null,
  availabilityStatus: null,
  interests: [],
  expertise: null,
  bio: null,
  instagram: null,
  x: null,
  tiktok: null,
  snapchat: null,
  facebook: null,
  profilePhoto: null,
  timezone: null,
  privacyPolicyAccepted: false,
  privacyPolicyVersion: null,
  termsOfUseAccepted: false,
  termsOfUseVersion: null,
  consentFormAccepted: false,
  consentFormVersion: null,
};

/** A user who registered and set their username on 1 November. */
const REGISTERED: ProfileSubject = {
  ...NEW_USER,
  name: 'Ayşe',
  surname: 'Yılmaz',
  username: 'ayse',
  lastUsernameChangeDate: new Date('2026-11-01T10:00:00.000Z'),
  isRegistrationComplete: true,
  privacyPolicyAccepted: true,
  privacyPolicyVersion: '1.0.0',
  termsOfUseAccepted: true,
  termsOfUseVersion: '1.1.0',
};

const plan = (
  body: Record<string, unknown>,
  current: ProfileSubject = NEW_USER,
  context: Partial<ProfileContext> = {},
) =>
  planProfileUpdate(body, {
    current,
    now: NOW,
    policies: POLICIES,
    minAge: 13,
    usernameChangeCooldownSeconds: 2_592_000,
    ...context,
  });

/** The columns a valid patch writes (fails the test with the details otherwise). */
function changesOf(
  body: Record<string, unknown>,
  current: ProfileSubject = NEW_USER,
  context: Partial<ProfileContext> = {},
) {
  const result = plan(body, current, context);
  if (!result.ok) throw new Error(`expected the patch to be valid, got ${result.status}: ${result.details}`);
  return result.changes;
}

const invalid = (...details: string[]) => ({ ok: false, status: 400, details });
const repeat = (text: string, times: number) => text.repeat(times);

describe('the body', () => {
  it('may be empty, changing nothing', () => {
    expect(plan({})).toEqual({ ok: true, changes: {}, events: [], completesRegistration: false });
  });

  it.each([
    ['_id', '00000000-0000-0000-0000-000000000000'],
    ['email', 'someone.else@example.com'],
    ['roles', ['admin']],
    ['followersCount', 1_000_000],
    ['followingCount', 0],
    ['minutePriceInLiveStream', 0],
    ['creditBalance', 999],
    ['lastLogin', '2026-11-22T10:00:00.000Z'],
    ['lastUsernameChangeDate', null],
    ['isRegistrationComplete', true],
    ['signupSource', 'ads'],
    ['signupCampaign', 'spring'],
    ['createdAt', '2020-01-01T00:00:00.000Z'],
    ['updatedAt', '2020-01-01T00:00:00.000Z'],
    ['accountDeletionStatus', null],
    ['accountDeletionRequestedAt', null],
    ['accountDeletionScheduledFor', null],
    ['accountDeletionCancelledAt', null],
    ['accountDeletionFinalizedAt', null],
  ])('rejects the read-only field %s, naming it', (field, value) => {
    expect(plan({ name: 'Ayşe', [field]: value })).toEqual(invalid(`${field} is read-only`));
  });

  it('rejects an unknown field (a typo is not silently dropped)', () => {
    expect(plan({ nmae: 'Ayşe', surname: 'Yılmaz' })).toEqual(invalid('nmae is not a profile field'));
  });

  it('shortens a very long unknown field name in the detail', () => {
    const result = plan({ [repeat('a', 500)]: 1 });
    expect(result).toEqual(invalid(`${repeat('a', 64)}… is not a profile field`));
  });

  it('reports every failing field at once, one detail each, in a stable order', () => {
    expect(
      plan({
        email: 'x@example.com',
        name: '   ',
        username: 'a',
        countryCode: '+90',
        phoneNumber: '5321234567',
        birthDate: '2020-01-01',
        gender: 'robot',
        interests: 'music',
        bio: 5,
        instagram: 'https://instagram.com/ayse',
        profilePhoto: 'http://cdn.example.com/a.jpg',
        timezone: '+03:00',
        privacyPolicyAccepted: false,
        privacyPolicyVersion: '0.9.0',
        consentFormVersion: '2.0.0',
        favouriteColour: 'blue',
      }),
    ).toEqual(
      invalid(
        'email is read-only',
        'favouriteColour is not a profile field',
        'name must be 1–60 characters',
        'username must be 3–30 characters',
        'countryCode must be 1–3 digits without + (such as 90)',
        'birthDate must be an ISO 8601 date-time such as 2000-01-31T00:00:00.000Z',
        'gender must be one of female, male, non-binary, other, prefer-not-to-say',
        'interests must be an array of strings or null',
        'bio must be a string or null',
        'instagram must be a handle such as ayse.yilmaz, not a URL',
        'profilePhoto must be an https:// URL',
        'timezone must be an IANA time zone name such as Europe/Istanbul',
        'privacyPolicyAccepted must be true (acceptance is withdrawn by deleting the account)',
        'privacyPolicyVersion must be the current version 1.0.0',
        'consentFormAccepted must be sent together with consentFormVersion',
      ),
    );
  });

  it('writes only the fields whose value changes', () => {
    const current = { ...REGISTERED, bio: 'Photographer.', timezone: 'Europe/Istanbul' };
    expect(plan({ name: ' Ayşe ', bio: 'Photographer.', timezone: 'UTC' }, current)).toEqual({
      ok: true,
      changes: { timezone: 'UTC' },
      events: [{ type: 'profile_updated', details: { fields: 'timezone' } }],
      completesRegistration: false,
    });
  });
});

describe('name and surname', () => {
  it('are trimmed', () => {
    expect(changesOf({ name: '  Ayşe ', surname: '\tYılmaz\n' })).toEqual({
      name: 'Ayşe',
      surname: 'Yılmaz',
    });
  });

  it.each(['name', 'surname'])('%s is 1–60 characters, counting an emoji as one', (field) => {
    expect(changesOf({ [field]: repeat('é', 60) })).toEqual({ [field]: repeat('é', 60) });
    expect(changesOf({ [field]: repeat('🙂', 60) })).toEqual({ [field]: repeat('🙂', 60) });
    expect(plan({ [field]: repeat('é', 61) })).toEqual(invalid(`${field} must be 1–60 characters`));
    expect(plan({ [field]: '' })).toEqual(invalid(`${field} must be 1–60 characters`));
    expect(plan({ [field]: '   ' })).toEqual(invalid(`${field} must be 1–60 characters`));
  });

  it.each(['Ay\u0000şe', 'Ayşe\nYılmaz', 'Ay\u0007şe', 'Ay\u009bşe'])(
    'reject control characters: %j',
    (name) => {
      expect(plan({ name })).toEqual(
        invalid('name must not contain control characters, line separators or bidirectional controls'),
      );
    },
  );

  it.each(['Ayşe\u202e', 'Ay\u2066şe', 'Ayşe\u2028Yılmaz'])(
    'reject bidirectional controls, which would turn the surname around when shown, and line separators: %j',
    (name) => {
      expect(plan({ name })).toEqual(
        invalid('name must not contain control characters, line separators or bidirectional controls'),
      );
    },
  );

  it.each(['\u200b', '\u200d', '\u3164', '\u2800', '\u0301'])(
    'must show something: %j is refused',
    (name) => {
      expect(plan({ name })).toEqual(invalid('name must contain a visible character'));
      // Which would otherwise clear a name that cannot be cleared.
      expect(plan({ name }, REGISTERED)).toEqual(invalid('name must contain a visible character'));
    },
  );

  it('keep the zero-width characters some scripts write inside a name', () => {
    expect(changesOf({ name: 'نسرین\u200cدخت' })).toEqual({ name: 'نسرین\u200cدخت' });
  });

  it('are counted in Unicode normalization form C, and stored as sent', () => {
    expect(changesOf({ surname: repeat('e\u0301', 60) })).toEqual({ surname: repeat('e\u0301', 60) });
    expect(plan({ surname: repeat('e\u0301', 61) })).toEqual(invalid('surname must be 1–60 characters'));
    // NFC would turn the compatibility ideograph 神 (U+FA19) some names are written with into U+795E.
    expect(changesOf({ surname: '\ufa19田' })).toEqual({ surname: '\ufa19田' });
  });

  it('reject a lone surrogate rather than store another character in its place', () => {
    expect(plan({ name: 'A\ud800B' })).toEqual(invalid('name must not contain a lone surrogate'));
    expect(plan({ interests: ['\udc00'] })).toEqual(
      invalid('interests entries must not contain a lone surrogate'),
    );
  });

  it.each([42, true, ['Ayşe'], { first: 'Ayşe' }])('reject a value of the wrong JSON type: %j', (name) => {
    expect(plan({ name })).toEqual(invalid('name must be a string or null'));
  });

  it('sent exactly as stored change nothing, even a value the rules would now refuse', () => {
    const current = {
      ...REGISTERED,
      name: 'Ayşe\u202e',
      profilePhoto: 'https://cdn.example.com',
      // Stored before MIN_AGE was raised, and a phone number longer than E.164 allows.
      birthDate: new Date('2014-01-01T00:00:00.000Z'),
      countryCode: '999',
      phoneNumber: '12345678901234',
    };
    const sentBack = {
      name: 'Ayşe\u202e',
      profilePhoto: 'https://cdn.example.com',
      birthDate: '2014-01-01T00:00:00.000Z',
      countryCode: '999',
      phoneNumber: '12345678901234',
      surname: 'Kaya',
    };
    expect(plan(sentBack, current, { minAge: 16 })).toMatchObject({ ok: true, changes: { surname: 'Kaya' } });
  });

  it('are cleared with null before registration is complete', () => {
    const current = { ...NEW_USER, name: 'Ayşe', surname: 'Yılmaz' };
    expect(changesOf({ name: null, surname: null }, current)).toEqual({ name: null, surname: null });
  });

  it('cannot be cleared once registration is complete, and neither can the username', () => {
    expect(plan({ name: null, surname: null, username: null }, REGISTERED)).toEqual(
      invalid(
        'name cannot be cleared once registration is complete',
        'surname cannot be cleared once registration is complete',
        'username cannot be cleared once registration is complete',
      ),
    );
  });

  it('can still be changed once registration is complete', () => {
    expect(changesOf({ surname: 'Kaya' }, REGISTERED)).toEqual({ surname: 'Kaya' });
  });
});

describe('username', () => {
  it('lower-cases the Kelvin sign into the letter k, as Unicode does', () => {
    expect(changesOf({ username: '\u212aate' })).toMatchObject({ username: 'kate' });
  });

  it('is stored lower-cased and trimmed, and setting it writes the change time', () => {
    const result = plan({ username: '  Ayse.Yilmaz_1 ' });
    expect(result).toEqual({
      ok: true,
      changes: { username: 'ayse.yilmaz_1', lastUsernameChangeDate: NOW },
      events: [{ type: 'username_changed' }],
      completesRegistration: false,
    });
  });

  it('turns Alice into alice', () => {
    expect(changesOf({ username: 'Alice' })).toMatchObject({ username: 'alice' });
  });

  it.each([
    ['ab', 'username must be 3–30 characters'],
    [repeat('a', 31), 'username must be 3–30 characters'],
    ['ayşe', 'username may contain only a–z, 0–9, . and _'],
    ['ayse-yilmaz', 'username may contain only a–z, 0–9, . and _'],
    ['ayse yilmaz', 'username may contain only a–z, 0–9, . and _'],
    ['@ayse', 'username may contain only a–z, 0–9, . and _'],
    ['\u0130smail', 'username may contain only a–z, 0–9, . and _'],
    ['.ayse', 'username must not start or end with .'],
    ['ayse.', 'username must not start or end with .'],
  ])('rejects %j', (username, detail) => {
    expect(plan({ username })).toEqual(invalid(detail));
  });

  it('accepts the edges of the rule', () => {
    expect(changesOf({ username: 'a.b' })).toMatchObject({ username: 'a.b' });
    expect(changesOf({ username: '_a_' })).toMatchObject({ username: '_a_' });
    expect(changesOf({ username: repeat('9', 30) })).toMatchObject({ username: repeat('9', 30) });
  });

  it('treats the current username, in any case, as a no-op even within the cooldown', () => {
    expect(plan({ username: ' AYSE ' }, REGISTERED)).toEqual({
      ok: true,
      changes: {},
      events: [],
      completesRegistration: false,
    });
  });

  it('can be set the first time whatever the clock says', () => {
    expect(changesOf({ username: 'ayse' }, NEW_USER)).toEqual({
      username: 'ayse',
      lastUsernameChangeDate: NOW,
    });
  });

  it('cannot be changed again within the cooldown: 409 with the exact time it becomes possible', () => {
    expect(plan({ username: 'ayse.yilmaz' }, REGISTERED)).toEqual({
      ok: false,
      status: 409,
      details: ['username can be changed again at 2026-12-01T10:00:00.000Z'],
    });
  });

  it('can be changed from that exact time on', () => {
    const at = new Date('2026-12-01T10:00:00.000Z');
    expect(changesOf({ username: 'ayse.yilmaz' }, REGISTERED, { now: at })).toEqual({
      username: 'ayse.yilmaz',
      lastUsernameChangeDate: at,
    });
    expect(plan({ username: 'ayse.yilmaz' }, REGISTERED, { now: new Date(at.getTime() - 1) })).toMatchObject({
      status: 409,
    });
  });

  it('follows the configured cooldown', () => {
    const current = { ...REGISTERED, lastUsernameChangeDate: new Date('2026-11-22T09:59:30.000Z') };
    expect(plan({ username: 'ayse2' }, current, { usernameChangeCooldownSeconds: 60 })).toEqual({
      ok: false,
      status: 409,
      details: ['username can be changed again at 2026-11-22T10:00:30.000Z'],
    });
    expect(plan({ username: 'ayse2' }, current, { usernameChangeCooldownSeconds: 30 })).toMatchObject({
      ok: true,
    });
  });

  it('allows no change after one stored as infinity, as the last time a Date holds (written by hand)', () => {
    const current = { ...REGISTERED, lastUsernameChangeDate: new Date(LAST_TIME) };
    expect(plan({ username: 'ayse2' }, current)).toEqual({
      ok: false,
      status: 409,
      details: ['username can be changed again at +275760-09-13T00:00:00.000Z'],
    });
  });

  it('answers a 400 rather than the cooldown 409 when another field is invalid', () => {
    expect(plan({ username: 'ayse.yilmaz', bio: 42 }, REGISTERED)).toEqual(
      invalid('bio must be a string or null'),
    );
  });

  it('can be cleared before registration completes, which does not restart the cooldown', () => {
    const current = { ...REGISTERED, isRegistrationComplete: false };
    const at = new Date('2026-12-01T10:00:00.000Z');
    expect(plan({ username: null }, current, { now: at })).toEqual({
      ok: true,
      changes: { username: null },
      events: [{ type: 'username_changed' }],
      completesRegistration: false,
    });
  });

  it('cannot be cleared within the cooldown, which would keep the registration from completing until it ends', () => {
    const current = { ...REGISTERED, isRegistrationComplete: false };
    expect(plan({ username: null }, current)).toEqual({
      ok: false,
      status: 409,
      details: ['username can be changed again at 2026-12-01T10:00:00.000Z'],
    });
  });

  it('set again after being cleared still waits for the cooldown of the last change', () => {
    const cleared = { ...REGISTERED, isRegistrationComplete: false, username: null };
    expect(plan({ username: 'someone' }, cleared)).toMatchObject({
      status: 409,
      details: ['username can be changed again at 2026-12-01T10:00:00.000Z'],
    });
  });
});

describe('countryCode and phoneNumber', () => {
  it('are stored as digits, trimmed', () => {
    expect(changesOf({ countryCode: ' 90 ', phoneNumber: '5321234567 ' })).toEqual({
      countryCode: '90',
      phoneNumber: '5321234567',
    });
  });

  it('must come together, even when the other one is already stored', () => {
    const current = { ...REGISTERED, countryCode: '90', phoneNumber: '5321234567' };
    expect(plan({ phoneNumber: '5329876543' }, current)).toEqual(
      invalid('countryCode must be sent together with phoneNumber (both null clears the phone number)'),
    );
    expect(plan({ countryCode: '44' }, current)).toEqual(
      invalid('phoneNumber must be sent together with countryCode (both null clears the phone number)'),
    );
  });

  it('are cleared together with null', () => {
    const current = { ...REGISTERED, countryCode: '90', phoneNumber: '5321234567' };
    expect(changesOf({ countryCode: null, phoneNumber: null }, current)).toEqual({
      countryCode: null,
      phoneNumber: null,
    });
  });

  it('cannot be half cleared', () => {
    expect(plan({ countryCode: '90', phoneNumber: null })).toEqual(
      invalid('countryCode and phoneNumber must both be set or both be null'),
    );
  });

  it.each([
    [
      { countryCode: '+90', phoneNumber: '5321234567' },
      'countryCode must be 1–3 digits without + (such as 90)',
    ],
    [
      { countryCode: '1234', phoneNumber: '5321234567' },
      'countryCode must be 1–3 digits without + (such as 90)',
    ],
    [{ countryCode: '', phoneNumber: '5321234567' }, 'countryCode must be 1–3 digits without + (such as 90)'],
    [{ countryCode: 90, phoneNumber: '5321234567' }, 'countryCode must be a string or null'],
    [{ countryCode: '90', phoneNumber: '532 123 45 67' }, 'phoneNumber must be 4–14 digits'],
    [{ countryCode: '90', phoneNumber: '123' }, 'phoneNumber must be 4–14 digits'],
    [{ countryCode: '1', phoneNumber: repeat('1', 15) }, 'phoneNumber must be 4–14 digits'],
    [
      { countryCode: '999', phoneNumber: repeat('1', 13) },
      'phoneNumber and countryCode together must be at most 15 digits',
    ],
  ])('reject %j', (body, detail) => {
    expect(plan(body)).toEqual(invalid(detail));
  });

  it('accept the longest E.164 number', () => {
    expect(changesOf({ countryCode: '999', phoneNumber: repeat('1', 12) })).toEqual({
      countryCode: '999',
      phoneNumber: repeat('1', 12),
    });
  });
});

describe('birthDate', () => {
  it('is an ISO 8601 date-time, stored as a Date', () => {
    expect(changesOf({ birthDate: '1994-05-17T00:00:00.000Z' })).toEqual({
      birthDate: new Date('1994-05-17T00:00:00.000Z'),
    });
    expect(changesOf({ birthDate: ' 1994-05-17T00:00:00+03:00 ' })).toEqual({
      birthDate: new Date('1994-05-16T21:00:00.000Z'),
    });
  });

  it.each([
    '1994-05-17',
    '17/05/1994',
    'May 17, 1994',
    '1994-02-30T00:00:00Z',
    '1994-05-17T24:00:00Z',
    '1994-05-17T00:00:00',
    '',
  ])('rejects %j', (birthDate) => {
    expect(plan({ birthDate })).toEqual(
      invalid('birthDate must be an ISO 8601 date-time such as 2000-01-31T00:00:00.000Z'),
    );
  });

  it('rejects a timestamp number', () => {
    expect(plan({ birthDate: 769132800000 })).toEqual(
      invalid('birthDate must be an ISO 8601 date-time such as 2000-01-31T00:00:00.000Z'),
    );
  });

  it('is in the past', () => {
    expect(plan({ birthDate: '2027-01-01T00:00:00.000Z' }, NEW_USER, { minAge: 0 })).toEqual(
      invalid('birthDate must be in the past'),
    );
  });

  it('makes the user at least MIN_AGE years old, from the birthday on', () => {
    expect(changesOf({ birthDate: '2013-11-22T10:00:00.000Z' })).toEqual({
      birthDate: new Date('2013-11-22T10:00:00.000Z'),
    });
    expect(plan({ birthDate: '2013-11-22T10:00:00.001Z' })).toEqual(
      invalid('birthDate must be at least 13 years ago'),
    );
    expect(plan({ birthDate: '2010-01-01T00:00:00.000Z' }, NEW_USER, { minAge: 18 })).toEqual(
      invalid('birthDate must be at least 18 years ago'),
    );
  });

  it('makes the user at most 130 years old', () => {
    expect(changesOf({ birthDate: '1895-11-22T10:00:00.001Z' })).toEqual({
      birthDate: new Date('1895-11-22T10:00:00.001Z'),
    });
    expect(plan({ birthDate: '1895-11-22T10:00:00.000Z' })).toEqual(
      invalid('birthDate must be at most 130 years ago'),
    );
  });

  it('is cleared with null', () => {
    const current = { ...REGISTERED, birthDate: new Date('1994-05-17T00:00:00.000Z') };
    expect(changesOf({ birthDate: null }, current)).toEqual({ birthDate: null });
  });

  it('sent unchanged is a no-op', () => {
    const current = { ...REGISTERED, birthDate: new Date('1994-05-17T00:00:00.000Z') };
    expect(changesOf({ birthDate: '1994-05-17T03:00:00+03:00' }, current)).toEqual({});
  });
});

describe('gender and availabilityStatus', () => {
  it.each(GENDERS)('gender may be %s', (gender) => {
    expect(changesOf({ gender: ` ${gender} ` })).toEqual({ gender });
  });

  it.each(AVAILABILITY_STATUSES)('availabilityStatus may be %s', (availabilityStatus) => {
    expect(changesOf({ availabilityStatus })).toEqual({ availabilityStatus });
  });

  it('reject anything else, listing the choices', () => {
    expect(plan({ gender: 'Female', availabilityStatus: 'invisible' })).toEqual(
      invalid(
        'gender must be one of female, male, non-binary, other, prefer-not-to-say',
        'availabilityStatus must be one of available, busy, away, offline',
      ),
    );
  });

  it('are cleared with null', () => {
    const current = { ...REGISTERED, gender: 'female', availabilityStatus: 'busy' };
    expect(changesOf({ gender: null, availabilityStatus: null }, current)).toEqual({
      gender: null,
      availabilityStatus: null,
    });
  });
});

describe('interests', () => {
  it('are trimmed, and duplicates (ignoring case) collapse into the first, in order', () => {
    expect(changesOf({ interests: [' Hiking ', 'photography', 'hiking', 'HIKING', 'Jazz'] })).toEqual({
      interests: ['Hiking', 'photography', 'Jazz'],
    });
  });

  it('are at most 20 distinct entries, counted after collapsing', () => {
    const twenty = Array.from({ length: 20 }, (_, i) => `topic ${i}`);
    expect(changesOf({ interests: twenty })).toEqual({ interests: twenty });
    expect(changesOf({ interests: [...twenty, 'TOPIC 0', ' topic 1 '] })).toEqual({ interests: twenty });
    expect(plan({ interests: [...twenty, 'topic 20'] })).toEqual(
      invalid('interests must have at most 20 distinct entries'),
    );
  });

  it('that look the same are one, however their accents were typed', () => {
    expect(changesOf({ interests: ['café', 'cafe\u0301', 'CAFE\u0301'] })).toEqual({ interests: ['café'] });
  });

  it.each([['\u200b'], ['jazz\u202e'], ['ja\u2028zz']])('entries are one visible line: %j', (entry) => {
    expect(plan({ interests: [entry] })).toMatchObject({ ok: false, status: 400 });
  });

  it.each([[['  ']], [['']], [[repeat('x', 41)]]])('entries are 1–40 characters: %j', (interests) => {
    expect(plan({ interests })).toEqual(invalid('interests entries must be 1–40 characters'));
  });

  it.each(['hiking', [1, 2], [null], { 0: 'hiking' }])('must be an array of strings: %j', (interests) => {
    expect(plan({ interests })).toEqual(invalid('interests must be an array of strings or null'));
  });

  it('are cleared with null or []', () => {
    const current = { ...REGISTERED, interests: ['hiking'] };
    expect(changesOf({ interests: null }, current)).toEqual({ interests: [] });
    expect(changesOf({ interests: [] }, current)).toEqual({ interests: [] });
  });

  it('sent as stored are a no-op, but a new order is a change', () => {
    const current = { ...REGISTERED, interests: ['hiking', 'jazz'] };
    expect(changesOf({ interests: ['hiking', 'jazz', 'Jazz'] }, current)).toEqual({});
    expect(changesOf({ interests: ['jazz', 'hiking'] }, current)).toEqual({ interests: ['jazz', 'hiking'] });
  });
});

describe('expertise and bio', () => {
  it('are at most 100 and 500 characters', () => {
    expect(changesOf({ expertise: repeat('e', 100), bio: repeat('b', 500) })).toEqual({
      expertise: repeat('e', 100),
      bio: repeat('b', 500),
    });
    expect(plan({ expertise: repeat('e', 101), bio: repeat('b', 501) })).toEqual(
      invalid('expertise must be at most 100 characters', 'bio must be at most 500 characters'),
    );
  });

  it('count characters after trimming', () => {
    expect(changesOf({ bio: `  ${repeat('b', 500)}  ` })).toEqual({ bio: repeat('b', 500) });
  });

  it('keep line breaks inside a bio', () => {
    expect(changesOf({ bio: 'Photographer.\nIstanbul.\n' })).toEqual({ bio: 'Photographer.\nIstanbul.' });
  });

  it('are cleared with null or an empty string', () => {
    const current = { ...REGISTERED, expertise: 'Photography', bio: 'Hi' };
    expect(changesOf({ expertise: '   ', bio: null }, current)).toEqual({ expertise: null, bio: null });
  });
});

describe('social handles', () => {
  const FIELDS = ['instagram', 'x', 'tiktok', 'snapchat', 'facebook'];

  it.each(FIELDS)('%s drops a leading @ and keeps the case', (field) => {
    expect(changesOf({ [field]: ' @Ayse.Shoots_ ' })).toEqual({ [field]: 'Ayse.Shoots_' });
  });

  it.each(
    FIELDS.flatMap((field) =>
      ['https://instagram.com/ayse', 'instagram.com/ayse', 'www.tiktok.com', 'x.com/ayse'].map((url) => [
        field,
        url,
      ]),
    ),
  )('%s rejects the URL %s, saying so', (field, url) => {
    expect(plan({ [field]: url })).toEqual(
      invalid(`${field} must be a handle such as ayse.yilmaz, not a URL`),
    );
  });

  it.each(['ayse yilmaz', '@', '@@ayse', 'ayşe', repeat('a', 31), ''])('rejects %j', (instagram) => {
    expect(plan({ instagram })).toEqual(invalid('instagram must be 1–30 of A–Z, a–z, 0–9, . and _'));
  });

  it('accepts 30 characters after the @', () => {
    expect(changesOf({ x: `@${repeat('a', 30)}` })).toEqual({ x: repeat('a', 30) });
  });

  it('are cleared with null', () => {
    const current = { ...REGISTERED, instagram: 'ayse', tiktok: 'ayse' };
    expect(changesOf({ instagram: null, tiktok: null }, current)).toEqual({ instagram: null, tiktok: null });
  });

  it('reject a number', () => {
    expect(plan({ snapchat: 123 })).toEqual(invalid('snapchat must be a string or null'));
  });
});

describe('profilePhoto', () => {
  it('is an https:// URL', () => {
    expect(changesOf({ profilePhoto: ' https://cdn.example.com/u/ayse.jpg?v=2 ' })).toEqual({
      profilePhoto: 'https://cdn.example.com/u/ayse.jpg?v=2',
    });
  });

  it.each([
    'http://cdn.example.com/a.jpg',
    'ftp://cdn.example.com/a.jpg',
    'cdn.example.com/a.jpg',
    'https://',
    'https:///a.jpg',
    'javascript:alert(1)',
    'HTTPS://cdn.example.com/a.jpg',
    'https://cdn.example.com/my photo.jpg',
  ])('rejects %j', (profilePhoto) => {
    expect(plan({ profilePhoto })).toEqual(invalid('profilePhoto must be an https:// URL'));
  });

  it.each(['https://user:secret@cdn.example.com/a.jpg', 'https://token@cdn.example.com/a.jpg'])(
    'rejects %j, whose credentials every viewer would be shown',
    (profilePhoto) => {
      expect(plan({ profilePhoto })).toEqual(invalid('profilePhoto must not carry credentials'));
    },
  );

  it.each([
    'https://127.0.0.1/a.jpg',
    'https://0x7f.1/a.jpg',
    'https://[::1]/a.jpg',
    'https://169.254.169.254/latest/meta-data',
    'https://10.0.0.5/a.jpg',
    'https://localhost/a.jpg',
    'https://api.localhost/a.jpg',
    'https://intranet/a.jpg',
    'https://printer.local/a.jpg',
    'https://db.internal/a.jpg',
    'https://nas.home.arpa/a.jpg',
    'https://gateway.tessera.svc/a.jpg',
    'https://localhost.localdomain/a.jpg',
    'https://build.test/a.jpg',
    'https://router.home/a.jpg',
  ])('rejects %j, which a server fetching photos would reach in its own network', (profilePhoto) => {
    expect(plan({ profilePhoto })).toEqual(
      invalid('profilePhoto must be on a public host name, not an IP address or a local name'),
    );
  });

  it('is stored as a browser reads it, so that no reader finds another host or credentials in it', () => {
    expect(changesOf({ profilePhoto: 'https://cdn.good.com\\attacker:secret@evil.com/a.jpg' })).toEqual({
      profilePhoto: 'https://cdn.good.com/attacker:secret@evil.com/a.jpg',
    });
    expect(changesOf({ profilePhoto: 'https://CDN.Example.com/ä.jpg?"x"' })).toEqual({
      profilePhoto: 'https://cdn.example.com/%C3%A4.jpg?%22x%22',
    });
  });

  it('is at most 2048 characters', () => {
    const base = 'https://cdn.example.com/';
    const longest = base + repeat('a', 2048 - base.length);
    expect(changesOf({ profilePhoto: longest })).toEqual({ profilePhoto: longest });
    expect(plan({ profilePhoto: `${longest}a` })).toEqual(
      invalid('profilePhoto must be at most 2048 characters'),
    );
  });

  it('is cleared with null', () => {
    const current = { ...REGISTERED, profilePhoto: 'https://cdn.example.com/a.jpg' };
    expect(changesOf({ profilePhoto: null }, current)).toEqual({ profilePhoto: null });
  });
});

describe('timezone', () => {
  it.each([
    ['Europe/Istanbul', 'Europe/Istanbul'],
    [' America/New_York ', 'America/New_York'],
    ['europe/istanbul', 'Europe/Istanbul'],
    ['UTC', 'UTC'],
    ['utc', 'UTC'],
    ['Utc', 'UTC'],
    ['Etc/Gmt+5', 'Etc/GMT+5'],
    ['Etc/GMT-3', 'Etc/GMT-3'],
  ])('accepts %j as %j', (timezone, stored) => {
    expect(changesOf({ timezone })).toEqual({ timezone: stored });
  });

  it.each(['Etc/UTC', 'Asia/Kolkata', 'Europe/Kiev', 'US/Eastern'])(
    'keeps the alias %s as sent rather than swapping in another name',
    (timezone) => {
      expect(changesOf({ timezone })).toEqual({ timezone });
    },
  );

  it.each([
    ['us/eastern', 'America/New_York'],
    ['etc/utc', 'UTC'],
  ])(
    'stores %j, an alias in lower case, which no tzdb reader knows, as the zone it names: %j',
    (timezone, stored) => {
      expect(changesOf({ timezone })).toEqual({ timezone: stored });
    },
  );

  it.each(['Mars/Base', '+03:00', '-0500', 'GMT+3', 'Istanbul', 'Z', '', 'Europe/Istanbul/'])(
    'rejects %j',
    (timezone) => {
      expect(plan({ timezone })).toEqual(
        invalid('timezone must be an IANA time zone name such as Europe/Istanbul'),
      );
    },
  );

  it('is cleared with null', () => {
    expect(changesOf({ timezone: null }, { ...REGISTERED, timezone: 'UTC' })).toEqual({ timezone: null });
  });
});

describe('privacy policy and terms of use', () => {
  const acceptBoth = {
    privacyPolicyAccepted: true,
    privacyPolicyVersion: '1.0.0',
    termsOfUseAccepted: true,
    termsOfUseVersion: '1.1.0',
  };

  it('are accepted at the current versions, each recorded as an event', () => {
    expect(plan(acceptBoth)).toEqual({
      ok: true,
      changes: acceptBoth,
      events: [
        { type: 'policy_accepted', details: { policy: 'privacyPolicy', version: '1.0.0' } },
        { type: 'policy_accepted', details: { policy: 'termsOfUse', version: '1.1.0' } },
      ],
      completesRegistration: false,
    });
  });

  it('accept a trimmed version', () => {
    expect(changesOf({ termsOfUseAccepted: true, termsOfUseVersion: ' 1.1.0 ' })).toEqual({
      termsOfUseAccepted: true,
      termsOfUseVersion: '1.1.0',
    });
  });

  it('reject another version, naming the current one', () => {
    expect(plan({ ...acceptBoth, privacyPolicyVersion: '0.9.0', termsOfUseVersion: '1.0.0' })).toEqual(
      invalid(
        'privacyPolicyVersion must be the current version 1.0.0',
        'termsOfUseVersion must be the current version 1.1.0',
      ),
    );
  });

  it('cannot be withdrawn here', () => {
    expect(plan({ termsOfUseAccepted: false, termsOfUseVersion: '1.1.0' }, REGISTERED)).toEqual(
      invalid('termsOfUseAccepted must be true (acceptance is withdrawn by deleting the account)'),
    );
  });

  it.each([
    [
      { privacyPolicyAccepted: true },
      'privacyPolicyVersion must be sent together with privacyPolicyAccepted',
    ],
    [
      { privacyPolicyVersion: '1.0.0' },
      'privacyPolicyAccepted must be sent together with privacyPolicyVersion',
    ],
    [{ termsOfUseAccepted: true }, 'termsOfUseVersion must be sent together with termsOfUseAccepted'],
    [{ termsOfUseVersion: '1.1.0' }, 'termsOfUseAccepted must be sent together with termsOfUseVersion'],
    [
      { privacyPolicyAccepted: 'true', privacyPolicyVersion: '1.0.0' },
      'privacyPolicyAccepted must be true (acceptance is withdrawn by deleting the account)',
    ],
    [
      { privacyPolicyAccepted: true, privacyPolicyVersion: 1 },
      'privacyPolicyVersion must be the current version 1.0.0',
    ],
    [
      { privacyPolicyAccepted: true, privacyPolicyVersion: null },
      'privacyPolicyVersion must be the current version 1.0.0',
    ],
  ])('reject %j', (body, detail) => {
    expect(plan(body)).toEqual(invalid(detail));
  });

  it('accepted again at the same version change nothing and record nothing', () => {
    expect(plan(acceptBoth, REGISTERED)).toEqual({
      ok: true,
      changes: {},
      events: [],
      completesRegistration: false,
    });
  });

  it('are accepted again after a version bump', () => {
    const current = { ...REGISTERED, privacyPolicyVersion: '0.9.0' };
    expect(plan(acceptBoth, current)).toEqual({
      ok: true,
      changes: { privacyPolicyAccepted: true, privacyPolicyVersion: '1.0.0' },
      events: [{ type: 'policy_accepted', details: { policy: 'privacyPolicy', version: '1.0.0' } }],
      completesRegistration: false,
    });
  });
});

describe('consent form', () => {
  it('is accepted at the current version', () => {
    expect(plan({ consentFormAccepted: true, consentFormVersion: '2.0.0' })).toEqual({
      ok: true,
      changes: { consentFormAccepted: true, consentFormVersion: '2.0.0' },
      events: [{ type: 'policy_accepted', details: { policy: 'consentForm', version: '2.0.0' } }],
      completesRegistration: false,
    });
  });

  it.each([
    [
      { consentFormAccepted: true, consentFormVersion: '1.0.0' },
      'consentFormVersion must be the current version 2.0.0',
    ],
    [{ consentFormAccepted: true }, 'consentFormVersion must be sent together with consentFormAccepted'],
    [{ consentFormVersion: '2.0.0' }, 'consentFormAccepted must be sent together with consentFormVersion'],
    [
      { consentFormAccepted: 'yes', consentFormVersion: '2.0.0' },
      'consentFormAccepted must be true or false',
    ],
    [{ consentFormAccepted: null }, 'consentFormAccepted must be true or false'],
  ])('rejects %j', (body, detail) => {
    expect(plan(body)).toEqual(invalid(detail));
  });

  it('cannot be accepted when no consent form is in use', () => {
    const policies = { ...POLICIES, consentFormVersion: null };
    expect(plan({ consentFormAccepted: true, consentFormVersion: '2.0.0' }, NEW_USER, { policies })).toEqual(
      invalid('consentFormAccepted cannot be true: no consent form is in use'),
    );
  });

  const consenting = { ...REGISTERED, consentFormAccepted: true, consentFormVersion: '1.5.0' };

  it('is withdrawn with false, keeping the version, recorded as consent_withdrawn', () => {
    expect(plan({ consentFormAccepted: false }, consenting)).toEqual({
      ok: true,
      changes: { consentFormAccepted: false },
      events: [{ type: 'consent_withdrawn', details: { policy: 'consentForm', version: '1.5.0' } }],
      completesRegistration: false,
    });
  });

  it('is withdrawn naming the accepted or the current version, but not another', () => {
    expect(changesOf({ consentFormAccepted: false, consentFormVersion: '1.5.0' }, consenting)).toEqual({
      consentFormAccepted: false,
    });
    expect(changesOf({ consentFormAccepted: false, consentFormVersion: '2.0.0' }, consenting)).toEqual({
      consentFormAccepted: false,
    });
    expect(plan({ consentFormAccepted: false, consentFormVersion: '9.9.9' }, consenting)).toEqual(
      invalid('consentFormVersion must be left out or be the version being withdrawn'),
    );
  });

  it('can be withdrawn after the consent form is retired', () => {
    const policies = { ...POLICIES, consentFormVersion: null };
    expect(changesOf({ consentFormAccepted: false }, consenting, { policies })).toEqual({
      consentFormAccepted: false,
    });
  });

  it('withdrawn when never given changes nothing and records nothing', () => {
    expect(plan({ consentFormAccepted: false }, REGISTERED)).toEqual({
      ok: true,
      changes: {},
      events: [],
      completesRegistration: false,
    });
  });

  it('is accepted again at the current version after an older one', () => {
    expect(changesOf({ consentFormAccepted: true, consentFormVersion: '2.0.0' }, consenting)).toEqual({
      consentFormAccepted: true,
      consentFormVersion: '2.0.0',
    });
  });
});

describe('security events', () => {
  it('list a username change, then one profile_updated naming the fields (never values), then policies', () => {
    const result = plan(
      {
        timezone: 'Europe/Istanbul',
        bio: 'Secret bio text',
        username: 'ayse.yilmaz',
        name: 'Ayşe',
        privacyPolicyAccepted: true,
        privacyPolicyVersion: '1.0.0',
        consentFormAccepted: true,
        consentFormVersion: '2.0.0',
      },
      NEW_USER,
    );
    expect(result).toMatchObject({
      ok: true,
      events: [
        { type: 'username_changed' },
        { type: 'profile_updated', details: { fields: 'name,bio,timezone' } },
        { type: 'policy_accepted', details: { policy: 'privacyPolicy', version: '1.0.0' } },
        { type: 'policy_accepted', details: { policy: 'consentForm', version: '2.0.0' } },
      ],
    });
    expect(JSON.stringify(result.ok && result.events)).not.toMatch(/Secret|Istanbul|Ayşe|ayse/);
  });

  it('record nothing for a patch that changes nothing', () => {
    const current = { ...REGISTERED, bio: 'Hi', interests: ['jazz'] };
    expect(plan({ bio: ' Hi ', interests: ['jazz', 'Jazz'], username: 'Ayse' }, current)).toMatchObject({
      ok: true,
      events: [],
    });
  });
});

describe('completing registration', () => {
  const everything = {
    name: 'Ayşe',
    surname: 'Yılmaz',
    username: 'ayse',
    privacyPolicyAccepted: true,
    privacyPolicyVersion: '1.0.0',
    termsOfUseAccepted: true,
    termsOfUseVersion: '1.1.0',
  };

  it('happens on the patch that leaves every requirement satisfied, setting the stored flag', () => {
    const result = plan(everything);
    expect(result).toMatchObject({ ok: true, completesRegistration: true });
    expect(result.ok && result.changes.isRegistrationComplete).toBe(true);
  });

  it('happens when the last missing piece arrives', () => {
    const current = { ...NEW_USER, ...REGISTERED, isRegistrationComplete: false, termsOfUseAccepted: false };
    expect(plan({ termsOfUseAccepted: true, termsOfUseVersion: '1.1.0' }, current)).toMatchObject({
      ok: true,
      changes: { termsOfUseAccepted: true, termsOfUseVersion: '1.1.0', isRegistrationComplete: true },
      completesRegistration: true,
    });
  });

  it.each(['name', 'surname', 'username', 'privacyPolicyAccepted', 'termsOfUseAccepted'])(
    'does not happen without %s',
    (field) => {
      const body: Record<string, unknown> = { ...everything };
      delete body[field];
      delete body[field.replace('Accepted', 'Version')];
      const result = plan(body);
      expect(result).toMatchObject({ ok: true, completesRegistration: false });
      expect(result.ok && 'isRegistrationComplete' in result.changes).toBe(false);
    },
  );

  it('does not happen while a policy is accepted at an older version', () => {
    const current = { ...REGISTERED, isRegistrationComplete: false, termsOfUseVersion: '1.0.0' };
    expect(plan({ bio: 'Hi' }, current)).toMatchObject({ ok: true, completesRegistration: false });
  });

  it('happens only once: a registered user after a policy bump keeps the stored flag', () => {
    expect(plan({ ...everything, surname: 'Kaya' }, REGISTERED)).toMatchObject({
      ok: true,
      changes: { surname: 'Kaya' },
      completesRegistration: false,
    });
  });
});

describe('registrationStatus', () => {
  it('lists everything missing for a new user, in order, with the versions in force', () => {
    expect(registrationStatus(NEW_USER, POLICIES)).toEqual({
      isRegistrationComplete: false,
      missing: ['name', 'surname', 'username', 'privacyPolicy', 'termsOfUse'],
      policies: { privacyPolicyVersion: '1.0.0', termsOfUseVersion: '1.1.0', consentFormVersion: '2.0.0' },
    });
  });

  it('is complete for a registered user', () => {
    expect(registrationStatus(REGISTERED, POLICIES)).toMatchObject({
      isRegistrationComplete: true,
      missing: [],
    });
  });

  it('counts a policy accepted at an older version as missing', () => {
    const current = { ...REGISTERED, username: null, termsOfUseVersion: '1.0.0' };
    expect(registrationStatus(current, POLICIES)).toMatchObject({
      isRegistrationComplete: false,
      missing: ['username', 'termsOfUse'],
    });
  });

  it('counts a version whose acceptance is false as missing', () => {
    const current = { ...REGISTERED, privacyPolicyAccepted: false };
    expect(registrationStatus(current, POLICIES).missing).toEqual(['privacyPolicy']);
  });

  it('reports no consent form as null', () => {
    const policies = { ...POLICIES, consentFormVersion: null };
    expect(registrationStatus(REGISTERED, policies).policies.consentFormVersion).toBeNull();
  });
});

describe('the UserPatch schema of the OpenAPI document', () => {
  // The body validator's options (plugins/validation.ts).
  const options: Options = {
    allErrors: false,
    useDefaults: true,
    removeAdditional: false,
    strict: false,
    coerceTypes: false,
  };
  const validate = addFormats.default(new Ajv(options)).compile(UserPatch);
  const examples = (UserPatch as { examples?: unknown[] }).examples ?? [];

  it('has a realistic full example that both the schema and the rules of the default settings accept', () => {
    expect(examples).toHaveLength(1);
    const example = examples[0];
    expect(validate(example)).toBe(true);
    // No consent form by default (CONSENT_FORM_VERSION unset): "Try it out" must work as shipped.
    const policies = { privacyPolicyVersion: '1.0.0', termsOfUseVersion: '1.0.0', consentFormVersion: null };
    expect(plan(example as Record<string, unknown>, NEW_USER, { policies })).toMatchObject({
      ok: true,
      completesRegistration: true,
    });
  });

  it('documents every field the rules accept, with a description', () => {
    const documented = Object.entries(UserPatch.properties);
    const settable = Object.keys(NEW_USER).filter(
      (field) => field !== 'lastUsernameChangeDate' && field !== 'isRegistrationComplete',
    );
    expect(documented.map(([field]) => field).sort()).toEqual(settable.sort());
    expect(UserPatch.required ?? []).toEqual([]);
    for (const [field, schema] of documented) {
      expect(schema, field).toHaveProperty('description', expect.any(String));
    }
  });

  it.each([{ favouriteColour: 'blue' }, { email: 'someone@example.com' }, { isRegistrationComplete: true }])(
    'rejects %j, as the rules do',
    (body) => {
      expect(validate(body)).toBe(false);
      expect(plan(body)).toMatchObject({ ok: false, status: 400 });
    },
  );

  it.each([
    { name: 42 },
    { name: 'Ay\u0007şe' },
    { name: 'Ayşe\u202e' },
    { interests: ['ja\u2028zz'] },
    { username: '.ayse' },
    { username: 'ayse-yilmaz' },
    { gender: 'robot' },
    { availabilityStatus: 'invisible' },
    { interests: [repeat('x', 41)] },
    { bio: repeat('b', 501) },
    { instagram: 'https://instagram.com/ayse' },
    { instagram: '@www.ayse' },
    { profilePhoto: 'http://cdn.example.com/a.jpg' },
    { timezone: '+03:00' },
    { countryCode: '+90', phoneNumber: '5321234567' },
    { birthDate: '1994-05-17' },
    { privacyPolicyAccepted: false, privacyPolicyVersion: '1.0.0' },
  ])('rejects %j, as the rules do', (body) => {
    expect(validate(body)).toBe(false);
    expect(plan(body)).toMatchObject({ ok: false, status: 400 });
  });

  it.each([
    { username: 'Alice' },
    { instagram: '@ayse' },
    { name: null, gender: null, interests: null, tiktok: null },
    { countryCode: null, phoneNumber: null },
    { consentFormAccepted: false },
    { interests: Array.from({ length: 25 }, () => 'jazz') },
    {},
  ])('accepts %j, as the rules do', (body) => {
    expect(validate(body)).toBe(true);
    expect(plan(body)).toMatchObject({ ok: true });
  });

  // The gateway's draft-07 Ajv ignores dependentRequired; OpenAPI 3.1 readers use JSON Schema 2020-12.
  it('states the pairs that travel together, for JSON Schema 2020-12 readers', () => {
    const strictPairs = addFormats.default(new Ajv2020(options)).compile(UserPatch);
    expect(strictPairs({ privacyPolicyAccepted: true })).toBe(false);
    expect(strictPairs({ phoneNumber: '5321234567' })).toBe(false);
    expect(strictPairs({ consentFormVersion: '1.0.0' })).toBe(false);
    expect(strictPairs({ consentFormAccepted: false })).toBe(true);
    expect(strictPairs({ countryCode: '90', phoneNumber: '5321234567' })).toBe(true);
  });
});
