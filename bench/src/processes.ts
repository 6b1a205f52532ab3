import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { SERVICE_ARGS } from '@tessera/infra/bundle';

/** Where the measured processes and the load generator run (`taskset` core lists), or nothing when unpinned. */
export interface Pinning {
  services: string;
  loadGenerator: string;
}

/**
 * Pins this process (the load generator) to core 1, so that the measured processes, started on core
 * 0, share one core and do not compete with the load; undefined with fewer than two cores or no taskset.
 */
export function pinLoadGenerator(cores: number): Pinning | undefined {
  if (cores < 2) return undefined;
  // -a: every thread of this process, the libuv pool and V8's helpers too.
  return pinProcess(process.pid, '1') ? { services: '0', loadGenerator: '1' } : undefined;
}

/** Moves a running process (every thread) onto `cores`; false when taskset cannot (not allowed, or gone). */
export function pinProcess(pid: number, cores: string): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * The process environment of `pnpm start` and the image: the compile cache of a checkout (so a
 * service loads no TypeScript stripper once the cache is filled) and two malloc arenas.
 */
export function runtimeEnv(root: string): Record<string, string> {
  return { NODE_COMPILE_CACHE: path.join(root, 'node_modules/.cache/node'), MALLOC_ARENA_MAX: '2' };
}

/**
 * Builds the services of a checkout as the image's build does: their bundles, then the compile cache
 * (each service started in production without its configuration loads every module, then stops at
 * the configuration check).
 */
export async function buildServices(root: string): Promise<void> {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', APP_ENV: 'production' };
  await promisify(execFile)(process.execPath, ['infra/src/bundle.ts'], { cwd: root, env, timeout: 60_000 });
  for (const args of Object.values(SERVICE_ARGS))
    await promisify(execFile)(process.execPath, args, {
      cwd: root,
      env: { ...env, ...runtimeEnv(root) },
      timeout: 60_000,
    }).catch(() => {});
}

/** A child process whose last lines of output are kept, to explain a failure. */
export interface Service {
  name: string;
  child: ChildProcess;
  pid: number;
  output(): string;
  exited(): boolean;
  /** SIGTERM, then SIGKILL when it has not exited after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

export function startService(
  name: string,
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; pinning: Pinning | undefined },
): Service {
  // taskset execs the command, so the pid is the service's own.
  const [file, argv] = options.pinning
    ? ['taskset', ['-c', options.pinning.services, command, ...args]]
    : [command, args];
  const child = spawn(file, argv, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(chunk.toString());
    if (lines.length > 200) lines.splice(0, lines.length - 200);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exit = once(child, 'exit').catch(() => undefined);
  if (child.pid === undefined) throw new Error(`${name} did not start (${file} not found?)`);
  return {
    name,
    child,
    pid: child.pid,
    output: () => lines.join(''),
    exited: () => child.exitCode !== null || child.signalCode !== null,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
    },
  };
}

/** Polls `ready` until it resolves true; fails with the service's output when it exits or time runs out. */
export async function waitUntilReady(
  service: Service,
  ready: () => Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (service.exited()) throw new Error(`${service.name} exited while starting:\n${service.output()}`);
    if (await ready().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${service.name} was not ready after ${timeoutMs / 1000} s:\n${service.output()}`);
}
