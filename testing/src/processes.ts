import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type BUNDLES, SERVICE_ARGS } from '@tessera/infra/bundle';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { Json } from './json-client.ts';

// Processes a fault test owns: its own redis-server and Postgres server to kill and restart, and
// Tessera's services as an operator runs them. Never the machine's shared servers.

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

export async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  return port;
}

/** Polls `probe` every 50 ms until it is true; throws naming `what` after `timeoutMs`. */
export async function waitUntil(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${what}: not within ${timeoutMs} ms`);
}

export interface PrivateRedis {
  url: string;
  /** Stops the server; SIGKILL is a crash. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and folder (with what its AOF kept, if it keeps one). */
  start(): Promise<void>;
  /** Freezes it (SIGSTOP): its connections stay open and nothing answers, as on a hung server. */
  pause(): void;
  /** Lets a paused server run on (SIGCONT). */
  resume(): void;
  remove(): Promise<void>;
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** A redis-server's arguments for keeping its data as the README asks (AOF every second, no eviction). */
export const DURABLE_REDIS_ARGS = [
  '--appendonly',
  'yes',
  '--appendfsync',
  'everysec',
  '--maxmemory',
  '256mb',
  '--maxmemory-policy',
  'noeviction',
];

/**
 * A redis-server of the test's own on a free port, started with `args` (e.g. `--appendonly yes`). A
 * port can be taken between freePort and the server's bind (another test picked it too): the server
 * then exits at once, and starts again on another port. Only an answer from its own process counts.
 */
export async function startPrivateRedis(args: string[] = []): Promise<PrivateRedis> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-redis-'));
  let port = 0;
  let child: ChildProcess | undefined;

  async function answers(pid: number | undefined): Promise<boolean> {
    const client = new Redis(port, '127.0.0.1', {
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      // While it loads its AOF, Redis refuses commands with LOADING.
      if ((await client.ping()) !== 'PONG') return false;
      return new RegExp(`^process_id:${pid}\\r?$`, 'm').test(await client.info('server'));
    } catch {
      return false;
    } finally {
      client.disconnect();
    }
  }

  /** Starts redis-server on `port`; false when it exited at once. */
  async function launch(): Promise<boolean> {
    const started = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args],
      { stdio: 'ignore' },
    );
    child = started;
    try {
      await waitUntil(
        `redis-server on ${port} answering`,
        async () => exited(started) || (await answers(started.pid)),
      );
    } catch (error) {
      started.kill('SIGKILL');
      throw error;
    }
    return !exited(started);
  }

  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    if (await launch()) break;
    if (attempt === 3) throw new Error(`redis-server on ${port}: exited at start, three times`);
  }

  const server: PrivateRedis = {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      if (!(await launch())) throw new Error(`redis-server on ${port}: exited at start (port taken?)`);
    },
    async stop(signal = 'SIGTERM') {
      if (!child || exited(child)) return;
      const gone = once(child, 'exit');
      child.kill(signal);
      await gone;
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
    async remove() {
      server.resume();
      await server.stop('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
  return server;
}

export interface PrivatePostgres {
  /** The `postgres` database as the `postgres` user: create the test's databases from it. */
  adminUrl: string;
  /** `immediate` is a crash (no checkpoint); `fast` a clean stop that ends the connections. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** Freezes the server and its backends (SIGSTOP): connections stay open and nothing answers. */
  pause(): Promise<void>;
  /** Lets a paused server run on (SIGCONT). */
  resume(): Promise<void>;
  remove(): Promise<void>;
}

/**
 * A Postgres server of the test's own (initdb in a temporary folder, a free port, trust auth), for
 * tests that stop it. Postgres refuses to run as root, so as root it runs as the `postgres` user. A
 * port taken between freePort and the server's bind fails its first start: it starts on another one.
 */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const versions = await readdir('/usr/lib/postgresql').catch(() => []);
  const bin = versions.length > 0 ? `/usr/lib/postgresql/${versions.sort().at(-1)}/bin` : '';
  if (!bin)
    throw new Error('no Postgres server binaries in /usr/lib/postgresql (Debian: apt install postgresql)');
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-postgres-'));
  const data = path.join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const uid = Number(stdout.trim());
    await chown(dir, uid, uid);
  }
  // runuser is in /usr/sbin, which a CI runner's PATH may leave out.
  const runuser = existsSync('/usr/sbin/runuser') ? '/usr/sbin/runuser' : 'runuser';
  const pgTool = (tool: string, toolArgs: string[]) =>
    asRoot
      ? run(runuser, ['-u', 'postgres', '--', `${bin}/${tool}`, ...toolArgs])
      : run(`${bin}/${tool}`, toolArgs);

  await pgTool('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '--no-instructions']);
  let port = 0;

  const server: PrivatePostgres = {
    get adminUrl() {
      return `postgres://postgres@127.0.0.1:${port}/postgres`;
    },
    async start() {
      const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
      await pgTool('pg_ctl', ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', 'start']);
    },
    async stop(mode = 'fast') {
      await pgTool('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']).catch(() => {});
    },
    pause: () => signalAll('SIGSTOP'),
    resume: () => signalAll('SIGCONT'),
    async remove() {
      await server.resume();
      await server.stop('immediate');
      await rm(dir, { recursive: true, force: true });
    },
  };
  /** The postmaster's first line of postmaster.pid, and every process it started. */
  async function signalAll(signal: NodeJS.Signals) {
    const postmaster = Number(
      (await readFile(path.join(data, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0],
    );
    if (!postmaster) return;
    const { stdout } = await run('pgrep', ['-P', String(postmaster)]).catch(() => ({ stdout: '' }));
    for (const pid of [postmaster, ...stdout.split('\n').filter(Boolean).map(Number)])
      try {
        process.kill(pid, signal);
      } catch {
        // A backend that ended meanwhile.
      }
  }
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await server.start();
      return server;
    } catch (error) {
      if (attempt === 3) {
        await rm(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }
}

export interface PgBouncer {
  /** `postgresUrl` with PgBouncer's host and port: the same database, user and password, through it. */
  urlFor(postgresUrl: string): string;
  stop(): Promise<void>;
}

/**
 * A PgBouncer of the test's own (Debian: apt install pgbouncer) in front of the Postgres of
 * `adminUrl`, session pooling, with `settings` added to its `[pgbouncer]` section. It refuses to run
 * as root, so as root it runs as the `postgres` user. A port taken between freePort and its bind
 * makes it exit at once: it starts again on another one.
 */
export async function startPgBouncer(
  adminUrl: string,
  settings: Record<string, string> = {},
): Promise<PgBouncer> {
  const binary = '/usr/sbin/pgbouncer';
  if (!existsSync(binary)) throw new Error(`no ${binary} (Debian: apt install pgbouncer)`);
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-pgbouncer-'));
  const server = new URL(adminUrl);
  const asRoot = process.getuid?.() === 0;
  const uid = asRoot ? Number((await run('id', ['-u', 'postgres'])).stdout.trim()) : 0;
  await writeFile(path.join(dir, 'users.txt'), `"${decodeURIComponent(server.username)}" ""\n`);

  /** PgBouncer on `port`, once it answers there; undefined when it exited at once. */
  async function launch(port: number): Promise<ChildProcess | undefined> {
    const ini = [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = session',
      `logfile = ${path.join(dir, 'log')}`,
      ...Object.entries(settings).map(([name, value]) => `${name} = ${value}`),
    ].join('\n');
    await writeFile(path.join(dir, 'pgbouncer.ini'), `${ini}\n`);
    if (asRoot)
      for (const file of ['', 'pgbouncer.ini', 'users.txt']) await chown(path.join(dir, file), uid, uid);
    const child = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')], {
      stdio: 'ignore',
    });
    // Only once its log says it listens: another server may hold the port it could not bind.
    const listening = async () =>
      (await readFile(path.join(dir, 'log'), 'utf8').catch(() => '')).includes(
        `listening on 127.0.0.1:${port}`,
      );
    await waitUntil(`pgbouncer on ${port} listening`, async () => {
      if (exited(child)) return true;
      if (!(await listening())) return false;
      const client = new pg.Client({ connectionString: urlWith(adminUrl, port) });
      return client.connect().then(
        () => client.end().then(() => true),
        () => false,
      );
    });
    return exited(child) ? undefined : child;
  }

  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = await launch(port);
    if (child)
      return {
        urlFor: (postgresUrl) => urlWith(postgresUrl, port),
        async stop() {
          child.kill('SIGTERM');
          if (!exited(child)) await once(child, 'exit');
          await rm(dir, { recursive: true, force: true });
        },
      };
    if (attempt === 3) {
      const log = await readFile(path.join(dir, 'log'), 'utf8').catch(() => '');
      await rm(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer on ${port}: exited at start, three times\n${log}`);
    }
  }
}

function urlWith(postgresUrl: string, port: number): string {
  const url = new URL(postgresUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString();
}

/** Creates database `name` on a server. */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${admin.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export interface ServiceProcess {
  child: ChildProcess;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** Its JSON log lines so far, parsed. */
  logLines(): Json[];
  /** Sends `signal` and resolves with the exit code (null when a signal ended it). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** What a service process may use of the machine: its limit of open files (`ulimit -n`). */
export interface ProcessLimits {
  openFiles?: number;
}

/**
 * A Tessera service as its own process, started as `pnpm start` and the image start it: its bundle
 * (built by the integration tests' global setup), its heap as small.
 */
export function startService(
  service: keyof typeof BUNDLES,
  env: Record<string, string>,
  { openFiles }: ProcessLimits = {},
): ServiceProcess {
  const node = [process.execPath, ...SERVICE_ARGS[service]];
  // prlimit sets the limit, then runs node in its own process.
  const [command = '', ...args] = openFiles ? ['prlimit', `--nofile=${openFiles}`, '--', ...node] : node;
  const child = spawn(command, args, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: string[] = [];
  child.stdout?.on('data', (chunk: Buffer) => chunks.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => chunks.push(chunk.toString()));
  return {
    child,
    output: () => chunks.join(''),
    logLines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line)),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      // 'close', not 'exit': by then its last lines are read too.
      const exited = once(child, 'close') as Promise<[number | null]>;
      child.kill(signal);
      return (await exited)[0];
    },
  };
}

interface GatewayProcess {
  gateway: ServiceProcess;
  /** Its public port, and its operations port (metrics, health). */
  url: string;
  opsUrl: string;
}

/**
 * The gateway on free ports (started with `env` and LOG_LEVEL info or lower), once it answers ready
 * and logged that it listens there: not another test's gateway that took the port meanwhile. Ours
 * then exits at once, and starts again on other ports.
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  limits: ProcessLimits = {},
): Promise<GatewayProcess> {
  for (let attempt = 1; ; attempt++) {
    const [port, opsPort] = [await freePort(), await freePort()];
    const [url, opsUrl] = [`http://127.0.0.1:${port}`, `http://127.0.0.1:${opsPort}`];
    const gateway = startService(
      'gateway',
      {
        ...env,
        PORT: String(port),
        HOST: '127.0.0.1',
        OPS_PORT: String(opsPort),
        OPS_HOST: '127.0.0.1',
      },
      limits,
    );
    const ready = () =>
      fetch(`${url}/health/ready`).then(
        (response) => response.ok,
        () => false,
      );
    try {
      await waitUntil(
        `gateway on ${port} ready`,
        async () =>
          exited(gateway.child) ||
          (gateway.output().includes(`Server listening at ${url}`) && (await ready())),
        // Starting takes seconds, and more on a loaded machine.
        30_000,
      );
    } catch (error) {
      await gateway.stop('SIGKILL');
      throw new Error(`${(error as Error).message}\n${gateway.output()}`);
    }
    if (!exited(gateway.child)) return { gateway, url, opsUrl };
    if (attempt === 3)
      throw new Error(`gateway on ${port}: exited at start, three times\n${gateway.output()}`);
  }
}
