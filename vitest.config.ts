import { defineConfig } from 'vitest/config';

// Unit tests sit beside the code and need nothing running; every other test is an integration test.
const unitTests = [
  'apps/*/src/**/*.test.ts',
  'services/*/src/**/*.test.ts',
  'packages/*/src/**/*.test.ts',
  'infra/src/**/*.test.ts',
  'testing/src/**/*.test.ts',
];

export default defineConfig({
  test: {
    exclude: ['**/node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    // `expect.poll` waits until its check holds: a deadline longer than the default second hides no
    // bug, and a loaded machine needs it (`vi.waitFor` has no such setting: each call passes one).
    expect: { poll: { timeout: 8_000 } },
    projects: [
      { extends: true, test: { name: 'unit', include: unitTests } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['{apps,services,packages,infra,test,testing,bench}/**/*.test.ts'],
          exclude: unitTests,
          // Finds or starts Postgres and Redis, which unit tests must not wait for.
          globalSetup: ['./testing/src/global-setup.ts'],
        },
      },
    ],
  },
});
