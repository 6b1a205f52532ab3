import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, expect, inject, it } from 'vitest';
import { createDatabaseIfMissing, migrateToLatest } from '../src/migrate.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin connection to the tests' Postgres server (@tessera/testing's global setup). */
    postgresUrl: string;
  }
}

const INFRA_DIR = fileURLToPath(new URL('..', import.meta.url));

// Databases this file names, none of which exists before its test; all dropped at the end.
const names: string[] = [];
function missingDatabaseUrl(): string {
  const name = `tessera_test_${randomBytes(6).toString('hex')}`;
  names.push(name);
  const url = new URL(inject('postgresUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

afterAll(async () => {
  const admin = new pg.Client({ connectionString: inject('postgresUrl') });
  await admin.connect();
  try {
    for (const name of names)
      await admin.query(`drop database if exists ${admin.escapeIdentifier(name)} with (force)`);
  } finally {
    await admin.end();
  }
});

/** `pnpm db:migrate` as a developer runs it: `node src/migrate.ts` in development. */
function migrate(databaseUrl: string, env: Record<string, string> = { APP_ENV: 'development' }) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['src/migrate.ts'],
      {
        cwd: INFRA_DIR,
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, ...env },
        timeout: 30_000,
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    );
  });
}

it('creates a missing database once when several ask at once; the others find it', async () => {
  const url = missingDatabaseUrl();
  const created = await Promise.all([1, 2, 3, 4].map(() => createDatabaseIfMissing(url)));
  expect(created.filter(Boolean)).toHaveLength(1);
  expect(await createDatabaseIfMissing(url)).toBe(false);
});

it('`pnpm db:migrate` three times at once on a missing database: all succeed, the database migrated once', async () => {
  const url = missingDatabaseUrl();
  const runs = await Promise.all([1, 2, 3].map(() => migrate(url)));

  expect(runs.map(({ code, stderr }) => ({ code, stderr }))).toEqual(Array(3).fill({ code: 0, stderr: '' }));
  const output = runs.map(({ stdout }) => stdout).join('');
  expect(output.match(/^Created database /gm)).toHaveLength(1);
  const migrations = (await readdir(new URL('../migrations', import.meta.url))).filter((file) =>
    file.endsWith('.ts'),
  );
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query('select name from kysely_migration order by name');
    expect(rows.map((row) => `${row.name}.ts`)).toEqual(migrations.sort());
  } finally {
    await client.end();
  }
});

it('clears the sealed successors of tokens rotated before the grace window, once they were sealed with the token alone', async () => {
  const url = missingDatabaseUrl();
  expect((await migrate(url)).code).toBe(0);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // A database as an earlier version left it: that migration and the later ones not yet applied,
    // and tokens rotated an hour ago and a minute ago, each with its sealed successor.
    await client.query(
      `delete from kysely_migration where name >= '2026_11_27_000300_refresh_tokens_successors_cleared'`,
    );
    await client.query(`
      with u as (insert into users (email) values ('old@example.com') returning id),
        s as (insert into sessions (user_id, created_at, last_used_at, expires_at)
          select id, now(), now(), now() + interval '30 days' from u returning id)
      insert into refresh_tokens (token_hash, session_id, issued_at, expires_at, rotated_at, successor_sealed)
        select sha256(t::bytea), s.id, now() - interval '2 hours', now() + interval '30 days', now() - r, '\\x01'
        from s, (values ('hour', interval '1 hour'), ('minute', interval '1 minute')) v(t, r)`);
    expect((await migrate(url)).code).toBe(0);
    const { rows } = await client.query(
      `select successor_sealed is not null as sealed from refresh_tokens order by rotated_at`,
    );
    expect(rows).toEqual([{ sealed: false }, { sealed: true }]);
  } finally {
    await client.end();
  }
});

it("migrates where the role or database has the gateway's timeouts, which are not a migration's", async () => {
  const url = missingDatabaseUrl();
  await createDatabaseIfMissing(url);
  const admin = new pg.Client({ connectionString: inject('postgresUrl') });
  await admin.connect();
  try {
    // A millisecond: every statement of a migration takes longer.
    const name = admin.escapeIdentifier(new URL(url).pathname.slice(1));
    await admin.query(`alter database ${name} set statement_timeout = 1`);
  } finally {
    await admin.end();
  }
  expect((await migrateToLatest(url)).length).toBeGreaterThan(0);
});

it("takes node-postgres's form with no host after the credentials (the host in the query), and hides its password", async () => {
  const url = new URL(missingDatabaseUrl());
  const name = url.pathname.slice(1);
  const at = (port: string) =>
    `postgres://${url.username}:hunter2@/${name}?host=${url.hostname}&port=${port}`;
  const created = await migrate(at(url.port || '5432'));
  expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: '' });
  expect(created.stdout).toMatch(new RegExp(`^Created database ${name}\nApplied migrations: `));

  // Port 1 refuses: the failure says where Postgres was looked for, in one line, without the password.
  const refused = await migrate(at('1'), { APP_ENV: 'production' });
  expect(refused.code).toBe(1);
  expect(refused.stderr.trim()).toBe(
    `Migration failed: connect ECONNREFUSED ${url.hostname}:1 (is Postgres running at ${url.hostname}:1, and may this user sign in? DATABASE_URL is postgres://${url.username}:***@/${name}?host=${url.hostname}&port=1)`,
  );
});

it('refuses a DATABASE_URL that is no Postgres URL, without saying it back (its password)', async () => {
  const refused = await migrate('//app:s3cret@db.example.com/tessera');
  expect(refused.code).toBe(1);
  expect(refused.stderr.trim()).toBe(
    'Migration failed: DATABASE_URL must be a postgres:// or postgresql:// URL (a Unix socket: postgres:///tessera?host=/var/run/postgresql)',
  );
});

it('refuses to guess development, which creates a missing database, where NODE_ENV=production', async () => {
  const url = missingDatabaseUrl();
  const refused = await migrate(url, { NODE_ENV: 'production' });
  expect(refused.code).toBe(1);
  expect(refused.stderr.trim()).toBe(
    'Migration failed: APP_ENV is not set and NODE_ENV=production: set APP_ENV=production',
  );
  expect(await createDatabaseIfMissing(url)).toBe(true);
});
