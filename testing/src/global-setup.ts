import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { bundle } from '@tessera/infra/bundle';
import type { TestProject } from 'vitest/node';

import { unlinkKeys } from './redis-keys.ts';
import type {} from './services.ts';

const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';
const LOCAL_REDIS = 'redis://127.0.0.1:6379';

function answers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port), timeout: 1000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

async function containerRuntimeAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/**
 * Bundles the services, for the tests that start them as processes as `pnpm start` does; then finds
 * Postgres and Redis for the integration tests, in this order: TEST_DATABASE_URL and
 * TEST_REDIS_URL; Testcontainers when a container runtime answers; the local default ports.
 */
export default async function setup(project: TestProject) {
  await bundle();
  const fromEnv = { postgres: process.env.TEST_DATABASE_URL, redis: process.env.TEST_REDIS_URL };
  const stops: Array<() => Promise<unknown>> = [];
  let postgresUrl = fromEnv.postgres;
  let redisUrl = fromEnv.redis;

  if ((!postgresUrl || !redisUrl) && (await containerRuntimeAnswers())) {
    if (!postgresUrl) {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const postgres = await new PostgreSqlContainer('postgres:17-alpine').start();
      stops.push(() => postgres.stop());
      postgresUrl = postgres.getConnectionUri();
    }
    if (!redisUrl) {
      const { RedisContainer } = await import('@testcontainers/redis');
      const redis = await new RedisContainer('redis:7-alpine').start();
      stops.push(() => redis.stop());
      redisUrl = redis.getConnectionUrl();
    }
  }
  postgresUrl ??= (await answers(LOCAL_POSTGRES)) ? LOCAL_POSTGRES : undefined;
  redisUrl ??= (await answers(LOCAL_REDIS)) ? LOCAL_REDIS : undefined;
  if (!postgresUrl || !redisUrl) {
    throw new Error(
      `Integration tests need ${!postgresUrl ? 'Postgres' : 'Redis'}: set TEST_DATABASE_URL and TEST_REDIS_URL, start Docker for Testcontainers, or run ${!postgresUrl ? 'Postgres on 127.0.0.1:5432' : 'Redis on 127.0.0.1:6379'}.`,
    );
  }

  // Each test file deletes its keys when it ends; a key a closing queue or process writes after that
  // goes when the run ends.
  const redisNamespace = `t_${randomBytes(4).toString('hex')}`;
  project.provide('postgresUrl', postgresUrl);
  project.provide('redisUrl', redisUrl);
  project.provide('redisNamespace', redisNamespace);
  return async () => {
    await unlinkKeys(redisUrl, `${redisNamespace}_`);
    await Promise.all(stops.map((stop) => stop()));
  };
}
