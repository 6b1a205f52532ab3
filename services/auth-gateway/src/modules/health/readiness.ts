import type { RedisClient } from '@tessera/redis';
import { NotReadyError, type ReadinessChecks } from '@tessera/telemetry';
import { SCHEMA_BEHIND, type SchemaState } from '../../migration-state.ts';

/**
 * The gateway is ready while Postgres and Redis answer and Postgres has every migration of this
 * code (more is fine: an older gateway during a rolling deploy). Until the schema is first seen
 * current, its query is the probe of Postgres; then `select 1` on a connection of the probe's own
 * (`postgresAnswers`): a pool whose connections are all in use is busy, not down. One query per probe.
 * Redis answers on each of the gateway's connections (its commands', the mail queue's): after an
 * outage each reconnects in its own time, and a send fails until the queue's has.
 */
export function readinessChecks(
  postgresAnswers: () => Promise<void>,
  redis: RedisClient[],
  schema: SchemaState,
): ReadinessChecks {
  return {
    postgres: async () => {
      if (schema.knownCurrent()) await postgresAnswers();
      else if (!(await schema.isCurrent())) throw new NotReadyError(SCHEMA_BEHIND);
    },
    redis: async () => {
      await Promise.all(redis.map((client) => client.ping()));
    },
  };
}
