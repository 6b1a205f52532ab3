import type { Selectable } from 'kysely';
import { type Static, type TSchema, Type } from 'typebox';
import type { UsersTable } from '../../database.ts';

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Text = Nullable(Type.String());
const Time = Nullable(Type.String({ format: 'date-time' }));

/** The User of the specification: all 40 fields by their names, plus `_id`, `createdAt`, `updatedAt`. */
export const User = Type.Object(
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
    availabilityStatus: Text,
    birthDate: Time,
    gender: Text,
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
    accountDeletionStatus: Text,
    accountDeletionRequestedAt: Time,
    accountDeletionScheduledFor: Time,
    accountDeletionCancelledAt: Time,
    accountDeletionFinalizedAt: Time,
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);
export type User = Static<typeof User>;

export type UserRow = Selectable<UsersTable>;

const iso = (value: Date | null) => (value === null ? null : value.toISOString());

/** Maps a row to the User clients see, so rows never leave the service layer. */
export function toUser(row: UserRow): User {
  const { id, minutePriceInLiveStream, creditBalance, ...rest } = row;
  return {
    ...rest,
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
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
