import type { RedisClient } from '@tessera/redis';
import type { ReadinessChecks } from '@tessera/telemetry';
import { type Kysely, sql } from 'kysely';
import type { Database } from '../../database.ts';

/** The gateway is ready while Postgres and Redis answer. */
export function readinessChecks(db: Kysely<Database>, redis: RedisClient): ReadinessChecks {
  return {
    postgres: () => sql`select 1`.execute(db),
    redis: () => redis.ping(),
  };
}
