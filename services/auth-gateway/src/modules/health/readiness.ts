import type { ReadinessChecks } from '@tessera/telemetry';
import type { Redis } from 'ioredis';
import { type Kysely, sql } from 'kysely';
import type { Database } from '../../database.ts';

/** The gateway is ready while Postgres and Redis answer. */
export function readinessChecks(db: Kysely<Database>, redis: Redis): ReadinessChecks {
  return {
    postgres: () => sql`select 1`.execute(db),
    redis: () => redis.ping(),
  };
}
