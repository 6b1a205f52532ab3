import { readFile } from 'node:fs/promises';
import type {} from '@tessera/testing';
import type { OpenAPI3 } from 'openapi-typescript';
import { expect, inject, it } from 'vitest';
import { openApiDocument } from '../../../services/auth-gateway/scripts/openapi.ts';
import { CLIENT_TYPES_FILE, clientTypesSource } from '../scripts/generate-types.ts';

it("src/api.generated.ts is what `pnpm client:types` writes from this tree's gateway", async () => {
  const document = await openApiDocument({
    postgresUrl: inject('postgresUrl'),
    redisUrl: inject('redisUrl'),
  });
  const fresh = await clientTypesSource(document as OpenAPI3);
  const committed = await readFile(CLIENT_TYPES_FILE, 'utf8');

  expect(committed, 'src/api.generated.ts is stale: run pnpm client:types').toBe(fresh);
});
