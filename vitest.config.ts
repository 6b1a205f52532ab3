import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['{services,packages,infra,test}/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
    globalSetup: ['./packages/testing/src/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
  },
});
