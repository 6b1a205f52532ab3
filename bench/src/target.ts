import { generateKeyPairSync, randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { SERVICE_ARGS } from '@tessera/infra/bundle';
import pg from 'pg';
import type { Cleanup } from './cleanup.ts';
import { GatewayClient } from './gateway-client.ts';
import type { MeteredProcesses } from './meter.ts';
import { Population } from './population.ts';
import { isBackendOf, type Memory, memoryOf, NO_MEMORY, peak } from './proc-stats.ts';
import {
  buildServices,
  freePort,
  type Pinning,
  pinProcess,
  runtimeEnv,
  type Service,
  startService,
  waitUntilReady,
} from './processes.ts';

/** The repository this bench belongs to. */
export const WORKING_TREE = fileURLToPath(new URL('../..', import.meta.url));

export interface TargetOptions {
  /** How the report names this revision. */
  label: string;
  /** A checkout of the revision, with its dependencies installed. */
  root: string;
  /** A Postgres URL of a database to administer from (the bench database is created beside it). */
  adminUrl: string;
  pinning: Pinning | undefined;
  logLevel: string;
  /** Requests in flight while preparing. */
  parallel: number;
  /** An OTLP/HTTP receiver the services export every span to; none exports when absent. */
  otlpEndpoint?: string;
  cleanup: Cleanup;
}

/** One revision under test: its own Redis server, its own database and its gateway process. */
export interface Target {
  label: string;
  root: string;
  baseUrl: string;
  gateway: Service;
  /** For the calls that prepare a flow (not measured). */
  client: GatewayClient;
  redis: { service: Service; url: string };
  population: Population;
  /** Gateway memory once started, before any load. */
  memoryIdle: Memory;
  /** Highest gateway memory seen so far, sampled every 250 ms from the start. */
  memoryPeak(): Memory;
  /** The gateway, its Redis and the Postgres backends of its database. */
  metered(): MeteredProcesses;
  /** Whether the Postgres backends of the bench database could be moved onto the services' core. */
  postgresPinned(): boolean;
  pinning: Pinning | undefined;
  logLevel: string;
  otlpEndpoint: string | undefined;
  /** Where what a flow starts besides (the mailer) is handed, so that an interrupted run stops it too. */
  cleanup: Cleanup;
}

/** The service names the services export under, which the OTLP sink counts by. */
export const SERVICE_NAMES = { gateway: 'tessera-auth-gateway', mailer: 'tessera-mailer' } as const;

/** A service's variables to export every span to `endpoint` (the SDK's default sampler); none without one. */
export function tracingEnv(endpoint: string | undefined, serviceName: string): Record<string, string> {
  return endpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: serviceName } : {};
}

/** Environment every child gets: only what it needs, so the caller's settings do not leak in. */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  if (process.env.NODE_OPTIONS) env.NODE_OPTIONS = process.env.NODE_OPTIONS;
  return env;
}

const UNLIMITED = '1000000000';

/**
 * Where the gateway queues its code emails. No mailer reads it while the HTTP flows run (it would
 * share the core); the mail drain empties it before it starts one.
 */
export const QUEUE_PREFIX = 'bench-bull';

function redisAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setTimeout(1000);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function startRedis(options: TargetOptions): Promise<Target['redis']> {
  const port = await freePort();
  const service = startService(
    `redis-server :${port}`,
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', os.tmpdir()],
    { cwd: os.tmpdir(), env: baseEnv(), pinning: options.pinning },
  );
  options.cleanup.add(`stop ${service.name}`, () => service.stop());
  await waitUntilReady(service, () => redisAnswers(port), 10_000);
  return { service, url: `redis://127.0.0.1:${port}` };
}

/**
 * A module of the revision under test (its migrations, its email contract), not of this tree, so that
 * each revision runs with its own schema and job format.
 */
function importFromRevision<Module>(root: string, file: string): Promise<Module> {
  return import(pathToFileURL(path.join(root, file)).href) as Promise<Module>;
}

async function createDatabase(options: TargetOptions): Promise<string> {
  const name = `tessera_bench_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: options.adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${admin.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  options.cleanup.add(`drop database ${name}`, async () => {
    const client = new pg.Client({ connectionString: options.adminUrl });
    await client.connect();
    try {
      await client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`);
    } finally {
      await client.end();
    }
  });
  const url = new URL(options.adminUrl);
  url.pathname = `/${name}`;
  const { migrateToLatest } = await importFromRevision<typeof import('@tessera/infra')>(
    options.root,
    'infra/src/migrate.ts',
  );
  await migrateToLatest(url.toString());
  return name;
}

/** Starts the stack of one revision; everything it starts is handed to `options.cleanup`. */
export async function startTarget(options: TargetOptions): Promise<Target> {
  const [redis, database] = await Promise.all([
    startRedis(options),
    createDatabase(options),
    buildServices(options.root),
  ]);
  const databaseUrl = new URL(options.adminUrl);
  databaseUrl.pathname = `/${database}`;
  const [port, opsPort] = [await freePort(), await freePort()];
  const gateway = startService(`gateway (${options.label})`, process.execPath, SERVICE_ARGS.gateway, {
    cwd: options.root,
    pinning: options.pinning,
    env: {
      ...baseEnv(),
      ...runtimeEnv(options.root),
      APP_ENV: 'test',
      LOG_LEVEL: options.logLevel,
      PORT: String(port),
      HOST: '127.0.0.1',
      OPS_PORT: String(opsPort),
      OPS_HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl.toString(),
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: 'bench:',
      BULLMQ_PREFIX: QUEUE_PREFIX,
      JWT_PRIVATE_KEY: generateKeyPairSync('ed25519')
        .privateKey.export({ type: 'pkcs8', format: 'pem' })
        .toString(),
      OTP_SECRET: randomBytes(32).toString('hex'),
      // One client IP asks for every code and signs every user in: the sign-in limits are lifted.
      OTP_RESEND_COOLDOWN: '0',
      OTP_MAX_SENDS_PER_EMAIL_PER_HOUR: UNLIMITED,
      OTP_MAX_SENDS_PER_IP_PER_HOUR: UNLIMITED,
      OTP_MAX_FAILURES_PER_EMAIL_PER_DAY: UNLIMITED,
      OTP_MAX_FAILURES_PER_IP_PER_HOUR: UNLIMITED,
      RATE_LIMIT_MAX: UNLIMITED,
      ...tracingEnv(options.otlpEndpoint, SERVICE_NAMES.gateway),
    },
  });
  options.cleanup.add(`stop ${gateway.name}`, () => gateway.stop());
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitUntilReady(gateway, async () => (await fetch(`${baseUrl}/health/ready`)).ok);

  const admin = new pg.Client({ connectionString: options.adminUrl });
  await admin.connect();
  options.cleanup.add('close the admin connection', () => admin.end());
  // Only the backends serving the bench database: Postgres itself is shared with whatever else runs.
  const pinned = new Map<number, boolean>();
  const postgresBackends = async () => {
    const { rows } = await admin.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = $1',
      [database],
    );
    // Only backends of this host that serve it: a Postgres in a container or on another host names
    // pids that here are nobody's, or someone else's (the column then reads n/a).
    const pids = rows.map((row) => row.pid).filter((pid) => isBackendOf(pid, database));
    if (options.pinning)
      for (const pid of pids)
        if (!pinned.has(pid)) pinned.set(pid, pinProcess(pid, options.pinning.services));
    return pids;
  };
  await postgresBackends();

  // Settled after start: what the process holds before the first request.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const memoryIdle = memoryOf(gateway.pid) ?? NO_MEMORY;
  let memoryPeak = memoryIdle;
  const sampler = setInterval(() => {
    memoryPeak = peak(memoryPeak, memoryOf(gateway.pid));
  }, 250);
  options.cleanup.add('stop sampling', () => clearInterval(sampler));

  const client = new GatewayClient(baseUrl);
  return {
    label: options.label,
    root: options.root,
    baseUrl,
    gateway,
    client,
    redis,
    population: new Population(client, options.parallel),
    memoryIdle,
    memoryPeak: () => memoryPeak,
    metered: () => ({ service: gateway.pid, redis: redis.service.pid, postgresBackends }),
    postgresPinned: () => pinned.size > 0 && [...pinned.values()].every(Boolean),
    pinning: options.pinning,
    logLevel: options.logLevel,
    otlpEndpoint: options.otlpEndpoint,
    cleanup: options.cleanup,
  };
}
