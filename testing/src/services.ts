import { randomBytes } from 'node:crypto';
import { migrateToLatest } from '@tessera/infra';
import pg from 'pg';
import { inject } from 'vitest';
import { unlinkKeys } from './redis-keys.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin connection to a Postgres server; each test file creates its own database on it. */
    postgresUrl: string;
    redisUrl: string;
    /** This run's part of the shared Redis: each test file's keys start with it. */
    redisNamespace: string;
  }
}

const uniqueName = (prefix: string) => `${prefix}_${randomBytes(6).toString('hex')}`;

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh database of its own for one test file: migrated, unless `migrated: false` (an empty one). */
export async function createTestDatabase({ migrated = true } = {}): Promise<TestDatabase> {
  const adminUrl = inject('postgresUrl');
  const name = uniqueName('tessera_test');
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${admin.escapeIdentifier(name)}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  if (migrated) await migrateToLatest(url.toString());
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`);
      await client.end();
    },
  };
}

export interface TestRedis {
  url: string;
  /** For the gateway's own keys. */
  keyPrefix: string;
  /** For BullMQ's keys. */
  bullmqPrefix: string;
  /** Deletes every key this test file wrote. */
  flush(): Promise<void>;
}

/** Key prefixes of its own for one test file on the shared Redis. */
export function createTestRedis(): TestRedis {
  const namespace = uniqueName(inject('redisNamespace'));
  const keyPrefix = `${namespace}:`;
  const bullmqPrefix = `${namespace}-bull`;
  const url = inject('redisUrl');
  return {
    url,
    keyPrefix,
    bullmqPrefix,
    flush: () => unlinkKeys(url, namespace),
  };
}
