import type { RedisClient } from '@tessera/redis';
import { NotReadyError, type ReadinessChecks } from '@tessera/telemetry';
import { type Kysely, sql } from 'kysely';
import type { Database } from '../../database.ts';
import { SCHEMA_BEHIND, type SchemaState } from '../../migration-state.ts';

/**
 * The gateway is ready while Postgres and Redis answer and Postgres has every migration of this
 * code (more is fine: an older gateway during a rolling deploy). Until the schema is first seen
 * current, its query is the probe of Postgres; then `select 1`. One query per probe either way.
 * Redis answers on each of the gateway's connections (its commands', the mail queue's): after an
 * outage each reconnects in its own time, and a send fails until the queue's has.
 */
export function readinessChecks(
  db: Kysely<Database>,
  redis: RedisClient[],
  schema: SchemaState,
): ReadinessChecks {
  return {
    postgres: async () => {
      if (schema.knownCurrent()) await sql`select 1`.execute(db);
      else if (!(await schema.isCurrent())) throw new NotReadyError(SCHEMA_BEHIND);
    },
    redis: async () => {
      await Promise.all(redis.map((client) => client.ping()));
    },
  };
}
