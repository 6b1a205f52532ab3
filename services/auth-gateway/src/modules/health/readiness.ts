import type { RedisClient } from '@tessera/redis';
import { NotReadyError, type ReadinessChecks } from '@tessera/telemetry';
import type { PostgresState } from '../../database.ts';
import { SCHEMA_BEHIND, type SchemaState } from '../../migration-state.ts';

/** Why a gateway on a server that refuses writes is not ready: sign-ins, refreshes and sign-outs would answer 503. */
export const POSTGRES_READ_ONLY = 'postgres is read-only (a standby?): point DATABASE_URL at the primary';

/**
 * The gateway is ready while Postgres and Redis answer, Postgres takes writes (not a standby) and
 * has every migration of this code (more is fine: an older gateway during a rolling deploy). The
 * schema is asked of Postgres until it is first seen current; Postgres itself, on a connection of
 * the probe's own (`postgresAnswers`): a pool whose connections are all in use is busy, not down.
 * Redis answers on each of the gateway's connections (its commands', the mail queue's): after an
 * outage each reconnects in its own time, and a send fails until the queue's has.
 */
export function readinessChecks(
  postgresAnswers: () => Promise<PostgresState>,
  redis: RedisClient[],
  schema: SchemaState,
): ReadinessChecks {
  return {
    postgres: async () => {
      if (!schema.knownCurrent() && !(await schema.isCurrent())) throw new NotReadyError(SCHEMA_BEHIND);
      if ((await postgresAnswers()).readOnly) throw new NotReadyError(POSTGRES_READ_ONLY);
    },
    redis: async () => {
      await Promise.all(redis.map((client) => client.ping()));
    },
  };
}
