import { readFile } from 'node:fs/promises';
import { DATABASE_TYPES_FILE, generateDatabaseTypes } from '@tessera/infra/generate-types';
import { createTestDatabase, type TestDatabase } from '@tessera/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database?.drop());

describe('the database types', () => {
  it('are the ones generated from the migrated schema', async () => {
    const generated = await generateDatabaseTypes(database.url);
    const committed = await readFile(DATABASE_TYPES_FILE, 'utf8');
    expect(
      committed,
      'services/auth-gateway/src/database.generated.ts is stale: run `pnpm db:types` and commit the result',
    ).toBe(generated);
  });
});
