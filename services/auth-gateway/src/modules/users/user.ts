import { named } from '@tessera/contracts';
import type { Selectable } from 'kysely';
import { type Static, type TSchema, Type } from 'typebox';
import type { UsersTable } from '../../database.ts';
import { AVAILABILITY_STATUSES, GENDERS } from './profile.ts';

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Text = Nullable(Type.String());
// A time or null, serialized as it reads: a date stored outside years 1–9999 (by hand) is no 500.
const Time = Type.Unsafe<string | null>({ type: ['string', 'null'], format: 'date-time' });
// One of a closed list, or null: typed so by the document, serialized as any string. A value stored
// outside the list (an import, an edit by hand) must not turn every answer carrying the user into a
// 500 (a union is checked branch by branch as it is serialized; one schema of two types is not).
const OneOf = <const T extends readonly string[]>(values: T) =>
  Type.Unsafe<T[number] | null>({ type: ['string', 'null'], enum: [...values, null] });

const USER = "The account's profile: every field of the specification, plus `_id`, `createdAt`, `updatedAt`";

/** The User of the specification: all 40 fields by their names, plus `_id`, `createdAt`, `updatedAt`. */
export const User = named(
  'User',
  Type.Object(
    {
      _id: Type.String({ format: 'uuid' }),
      name: Text,
      surname: Text,
      username: Text,
      countryCode: Text,
      phoneNumber: Text,
      signupSource: Text,
      signupCampaign: Text,
      profilePhoto: Text,
      availabilityStatus: OneOf(AVAILABILITY_STATUSES),
      birthDate: Time,
      gender: OneOf(GENDERS),
      interests: Type.Array(Type.String()),
      expertise: Text,
      email: Type.String(),
      bio: Text,
      instagram: Text,
      x: Text,
      tiktok: Text,
      snapchat: Text,
      facebook: Text,
      privacyPolicyAccepted: Type.Boolean(),
      privacyPolicyVersion: Text,
      termsOfUseAccepted: Type.Boolean(),
      termsOfUseVersion: Text,
      consentFormAccepted: Type.Boolean(),
      consentFormVersion: Text,
      isRegistrationComplete: Type.Boolean(),
      roles: Type.Array(Type.String()),
      followersCount: Type.Integer(),
      followingCount: Type.Integer(),
      minutePriceInLiveStream: Type.Number(),
      creditBalance: Type.Number(),
      lastLogin: Time,
      timezone: Text,
      lastUsernameChangeDate: Time,
      accountDeletionStatus: OneOf(['scheduled', 'cancelled', 'finalized']),
      accountDeletionRequestedAt: Time,
      accountDeletionScheduledFor: Time,
      accountDeletionCancelledAt: Time,
      accountDeletionFinalizedAt: Time,
      createdAt: Type.String({ format: 'date-time' }),
      updatedAt: Type.String({ format: 'date-time' }),
    },
    { additionalProperties: false },
  ),
  USER,
);
export type User = Static<typeof User>;

/** A registered user as the API shows them: the example of every answer that carries a User. */
export const USER_EXAMPLE: User = {
  _id: '0b6d3f2e-5c1a-4e8b-9f7d-2a4c6e8f0a1b',
  name: 'Ayşe',
  surname: 'Yılmaz',
  username: 'ayse.yilmaz',
  countryCode: '90',
  phoneNumber: '5321234567',
  signupSource: 'ios',
  signupCampaign: null,
  profilePhoto: 'https://cdn.example.com/users/ayse.jpg',
  availabilityStatus: 'available',
  birthDate: '1994-05-17T00:00:00.000Z',
  gender: 'female',
  interests: ['photography', 'hiking'],
  expertise: 'Landscape photography',
  email: 'ayse@example.com',
  bio: 'Photographer in Istanbul.',
  instagram: 'ayse.shoots',
  x: 'ayseyilmaz',
  tiktok: null,
  snapchat: null,
  facebook: null,
  privacyPolicyAccepted: true,
  privacyPolicyVersion: '1.0.0',
  termsOfUseAccepted: true,
  termsOfUseVersion: '1.0.0',
  consentFormAccepted: false,
  consentFormVersion: null,
  isRegistrationComplete: true,
  roles: ['user'],
  followersCount: 0,
  followingCount: 0,
  minutePriceInLiveStream: 0,
  creditBalance: 0,
  lastLogin: '2026-11-23T09:58:12.000Z',
  timezone: 'Europe/Istanbul',
  lastUsernameChangeDate: '2026-11-20T14:03:00.000Z',
  accountDeletionStatus: null,
  accountDeletionRequestedAt: null,
  accountDeletionScheduledFor: null,
  accountDeletionCancelledAt: null,
  accountDeletionFinalizedAt: null,
  createdAt: '2026-11-20T14:01:45.000Z',
  updatedAt: '2026-11-23T09:58:12.000Z',
};

/** `User` for the answers that are a User, with the example (changed by `changes`) shown for them. */
export const userAnswer = (changes: Partial<User> = {}) =>
  named(
    'User',
    Type.Object(User.properties, {
      additionalProperties: false,
      examples: [{ ...USER_EXAMPLE, ...changes }],
    }),
    USER,
  );

export type UserRow = Selectable<UsersTable>;

const iso = (value: Date | null) => (value === null ? null : value.toISOString());

/**
 * Maps a row to the User clients see, so rows never leave the service layer. A column added to
 * `users` fails the typecheck here until the User has it (its serializer would drop it unseen).
 */
export function toUser(row: UserRow): User {
  const { id, minutePriceInLiveStream, creditBalance, ...rest } = row;
  return {
    ...(rest satisfies Record<Exclude<keyof typeof rest, keyof User>, never>),
    _id: id,
    birthDate: iso(row.birthDate),
    lastLogin: iso(row.lastLogin),
    lastUsernameChangeDate: iso(row.lastUsernameChangeDate),
    accountDeletionRequestedAt: iso(row.accountDeletionRequestedAt),
    accountDeletionScheduledFor: iso(row.accountDeletionScheduledFor),
    accountDeletionCancelledAt: iso(row.accountDeletionCancelledAt),
    accountDeletionFinalizedAt: iso(row.accountDeletionFinalizedAt),
    minutePriceInLiveStream: Number(minutePriceInLiveStream),
    creditBalance: Number(creditBalance),
    // As stored: the API writes only values of their lists, and anything else is sent as it is.
    gender: row.gender as User['gender'],
    availabilityStatus: row.availabilityStatus as User['availabilityStatus'],
    accountDeletionStatus: row.accountDeletionStatus as User['accountDeletionStatus'],
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
