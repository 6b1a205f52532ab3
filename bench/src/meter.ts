import { CpuOfProcessSet, cpuMs, type Memory, memoryOf, NO_MEMORY, peak } from './proc-stats.ts';

/** The processes whose cost a run is charged with. */
export interface MeteredProcesses {
  /** The gateway, or the mailer. */
  service: number;
  redis: number;
  /** The pids of the Postgres backends serving the bench database (they come and go with the pool). */
  postgresBackends?: () => Promise<number[]>;
}

export interface Usage {
  /** CPU milliseconds used during the run. */
  cpuMs: { service: number; postgres: number | undefined; redis: number };
  /** Highest memory of the service during the run. */
  memoryPeak: Memory;
  /** Share of one core the load generator (this process) used: near 1, it may have been the limit. */
  loadGeneratorBusy: number;
}

/**
 * Reads the processes' CPU time from /proc before and after a run, samples the service's memory every
 * 100 ms, and looks for new Postgres backends every 500 ms (the pool opens them under load).
 */
export async function meter<T>(
  processes: MeteredProcesses,
  run: () => Promise<T>,
): Promise<{ result: T; usage: Usage }> {
  const postgres = new CpuOfProcessSet();
  const observePostgres = async () => {
    if (processes.postgresBackends) postgres.observe(await processes.postgresBackends());
  };
  let memoryPeak = peak(NO_MEMORY, memoryOf(processes.service));
  let polls = 0;
  let polling: Promise<void> | undefined;
  const sampler = setInterval(() => {
    memoryPeak = peak(memoryPeak, memoryOf(processes.service));
    if (++polls % 5 === 0 && !polling)
      polling = observePostgres()
        .catch(() => {})
        .finally(() => {
          polling = undefined;
        });
  }, 100);

  await observePostgres();
  const before = { service: cpuMs(processes.service) ?? 0, redis: cpuMs(processes.redis) ?? 0 };
  const ownBefore = process.cpuUsage();
  const wallBefore = performance.now();
  let result: T;
  try {
    result = await run();
  } finally {
    clearInterval(sampler);
  }
  const wall = performance.now() - wallBefore;
  const own = process.cpuUsage(ownBefore);
  const after = { service: cpuMs(processes.service) ?? 0, redis: cpuMs(processes.redis) ?? 0 };
  await polling;
  await observePostgres();
  memoryPeak = peak(memoryPeak, memoryOf(processes.service));

  return {
    result,
    usage: {
      cpuMs: {
        service: after.service - before.service,
        postgres: processes.postgresBackends ? postgres.total() : undefined,
        redis: after.redis - before.redis,
      },
      memoryPeak,
      loadGeneratorBusy: (own.user + own.system) / 1000 / wall,
    },
  };
}
