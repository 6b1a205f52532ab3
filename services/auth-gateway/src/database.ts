// Postgres as Kysely sees it, generated from the migrated schema by `pnpm db:types`; the app imports it from here.
export type {
  DB as Database,
  RefreshTokens as RefreshTokensTable,
  SecurityEvents as SecurityEventsTable,
  Sessions as SessionsTable,
  Users as UsersTable,
} from './database.generated.ts';
