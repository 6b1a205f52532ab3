// Postgres as Kysely sees it, generated from the migrated schema by `pnpm db:types`; the app imports it from here.
export type {
  DB as Database,
  Sessions as SessionsTable,
  Users as UsersTable,
} from './database.generated.ts';

/** What the readiness probe learns of Postgres besides that it answers: whether it refuses writes (a standby). */
export interface PostgresState {
  readOnly: boolean;
}
