import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const ticksPerSecond = readConf('CLK_TCK', 100);
const pageSize = readConf('PAGESIZE', 4096);

function readConf(name: string, fallback: number): number {
  try {
    return Number(execFileSync('getconf', [name], { encoding: 'utf8' }).trim()) || fallback;
  } catch {
    return fallback;
  }
}

/**
 * CPU time (user + system, all threads) a process has used so far, in milliseconds; undefined once
 * it is gone. Clock ticks are 10 ms on Linux, which is why runs last seconds, not milliseconds.
 */
export function cpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces: fields are counted from the closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / ticksPerSecond;
}

/**
 * What a process holds in memory, bytes. `rss`: every resident page. `anonymous`: those that are
 * its own (heap, stacks); the rest are mapped from files, above all the node binary's code, which
 * every Node process on the host shares and the kernel can drop and read again.
 */
export interface Memory {
  rss: number;
  anonymous: number;
}

export const NO_MEMORY: Memory = { rss: 0, anonymous: 0 };

/**
 * Whether `pid` is, on this host, a Postgres backend serving `database`: its title names it
 * (`postgres: 15/main: user database 127.0.0.1(5432) idle`).
 */
export function isBackendOf(pid: number, database: string): boolean {
  try {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return title.startsWith('postgres:') && title.includes(` ${database} `);
  } catch {
    return false;
  }
}

/** A process's memory now (statm: resident, and shared = file-backed); undefined once it is gone. */
export function memoryOf(pid: number): Memory | undefined {
  try {
    const [, resident, shared] = readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ').map(Number);
    if (resident === undefined || shared === undefined) return undefined;
    return { rss: resident * pageSize, anonymous: (resident - shared) * pageSize };
  } catch {
    return undefined;
  }
}

/** The higher of each measure (the two peaks need not fall on the same sample). */
export function peak(a: Memory, b: Memory | undefined): Memory {
  return b ? { rss: Math.max(a.rss, b.rss), anonymous: Math.max(a.anonymous, b.anonymous) } : a;
}

/** The CPU model of this machine, as /proc/cpuinfo names it. */
export function cpuModel(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    return match?.[1]?.trim() ?? 'unknown CPU';
  } catch {
    return 'unknown CPU';
  }
}

/**
 * CPU used by a changing set of processes (the Postgres backends of one database come and go with
 * the pool): each pid counts from the first time it was seen (from zero when it appeared after
 * `start`) to the last time it was seen.
 */
export class CpuOfProcessSet {
  private readonly seen = new Map<number, { first: number; last: number }>();
  private started = false;

  /** Records the current CPU time of these pids. */
  observe(pids: Iterable<number>): void {
    for (const pid of pids) {
      const now = cpuMs(pid);
      if (now === undefined) continue;
      const known = this.seen.get(pid);
      if (known) known.last = now;
      else this.seen.set(pid, { first: this.started ? 0 : now, last: now });
    }
    this.started = true;
  }

  /** Milliseconds of CPU used since the first observation; undefined when no pid could be read. */
  total(): number | undefined {
    if (this.seen.size === 0) return undefined;
    let sum = 0;
    for (const { first, last } of this.seen.values()) sum += last - first;
    return sum;
  }
}
