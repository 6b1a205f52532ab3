import { readFile } from 'node:fs/promises';
import type {} from '@tessera/testing';
import { expect, inject, it } from 'vitest';
import { CLIENT_TYPES_FILE, generateClientTypes } from '../scripts/generate-types.ts';

it("src/api.generated.ts is what `pnpm client:types` writes from this tree's gateway", async () => {
  const fresh = await generateClientTypes({
    postgresUrl: inject('postgresUrl'),
    redisUrl: inject('redisUrl'),
  });
  const committed = await readFile(CLIENT_TYPES_FILE, 'utf8');

  expect(committed, 'src/api.generated.ts is stale: run pnpm client:types').toBe(fresh);
});
