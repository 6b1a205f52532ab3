import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, expect, inject, it } from 'vitest';
import { createDatabaseIfMissing } from '../src/migrate.ts';

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
function migrate(databaseUrl: string) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['src/migrate.ts'],
      {
        cwd: INFRA_DIR,
        env: { PATH: process.env.PATH ?? '', APP_ENV: 'development', DATABASE_URL: databaseUrl },
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
