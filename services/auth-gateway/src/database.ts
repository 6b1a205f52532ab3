import { CamelCasePlugin, type ColumnType, type Generated, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

/** Postgres as Kysely sees it (the migrations in infra/migrations are the source of this shape). */
export interface Database {
  users: UsersTable;
  sessions: SessionsTable;
  refreshTokens: RefreshTokensTable;
  securityEvents: SecurityEventsTable;
}

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type Defaulted<T> = ColumnType<T, T | undefined, T>;
// numeric columns come back from pg as strings to keep their precision.
type Numeric = ColumnType<string, number | string | undefined, number | string>;

export interface UsersTable {
  id: Generated<string>;
  email: string;
  name: string | null;
  surname: string | null;
  username: string | null;
  countryCode: string | null;
  phoneNumber: string | null;
  signupSource: string | null;
  signupCampaign: string | null;
  profilePhoto: string | null;
  availabilityStatus: string | null;
  birthDate: Timestamp | null;
  gender: string | null;
  interests: Defaulted<string[]>;
  expertise: string | null;
  bio: string | null;
  instagram: string | null;
  x: string | null;
  tiktok: string | null;
  snapchat: string | null;
  facebook: string | null;
  privacyPolicyAccepted: Defaulted<boolean>;
  privacyPolicyVersion: string | null;
  termsOfUseAccepted: Defaulted<boolean>;
  termsOfUseVersion: string | null;
  consentFormAccepted: Defaulted<boolean>;
  consentFormVersion: string | null;
  isRegistrationComplete: Defaulted<boolean>;
  roles: Defaulted<string[]>;
  followersCount: Defaulted<number>;
  followingCount: Defaulted<number>;
  minutePriceInLiveStream: Numeric;
  creditBalance: Numeric;
  lastLogin: Timestamp | null;
  timezone: string | null;
  lastUsernameChangeDate: Timestamp | null;
  accountDeletionStatus: string | null;
  accountDeletionRequestedAt: Timestamp | null;
  accountDeletionScheduledFor: Timestamp | null;
  accountDeletionCancelledAt: Timestamp | null;
  accountDeletionFinalizedAt: Timestamp | null;
  createdAt: Generated<Date>;
  updatedAt: Generated<Date>;
}

export interface SessionsTable {
  id: Generated<string>;
  userId: string;
  ipAddress: string | null;
  userAgent: string | null;
  createdAt: Timestamp;
  lastUsedAt: Timestamp;
  expiresAt: Timestamp;
  endedAt: Timestamp | null;
  endReason: string | null;
}

export interface RefreshTokensTable {
  tokenHash: Buffer;
  sessionId: string;
  issuedAt: Timestamp;
  expiresAt: Timestamp;
  rotatedAt: Timestamp | null;
  successorSealed: Buffer | null;
}

export interface SecurityEventsTable {
  id: Generated<string>;
  type: string;
  userId: string | null;
  sessionId: string | null;
  ipAddress: string | null;
  userAgent: string | null;
  details: ColumnType<Record<string, unknown>, string, never>;
  createdAt: Timestamp;
}

export function createDatabase(databaseUrl: string, onIdleError: (error: Error) => void): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10, connectionTimeoutMillis: 3000 });
  pool.on('error', onIdleError);
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] });
}
