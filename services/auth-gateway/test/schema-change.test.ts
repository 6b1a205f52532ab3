import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { body, post, signIn, startGateway, type TestGateway } from './helpers.ts';

// The gateway prepares its statements once per connection. A migration that changes the columns a
// prepared statement answers (here the users row a sign-in returns) while the gateway runs costs
// at most one 503 per pooled connection, never a wrong answer, and the same code then signs in.

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway();
});
afterAll(() => gateway.close());

it('answers 503 (retry) once per connection after a migration changes a prepared statement’s columns', async () => {
  await signIn(gateway.app, 'before@example.com');
  await signIn(gateway.app, 'before@example.com');

  const client = new pg.Client({ connectionString: gateway.config.database.url });
  await client.connect();
  await client.query('alter table users add column nickname text');
  await client.end();

  const email = 'before@example.com';
  const { code } = body(await post(gateway.app, '/api/v1/auth/send-otp-email', { email })).data;
  const statuses: number[] = [];
  for (let attempt = 0; attempt < 11 && statuses.at(-1) !== 200; attempt++) {
    const answer = await post(gateway.app, '/api/v1/auth/verify-otp-email', { email, code });
    statuses.push(answer.statusCode);
    if (answer.statusCode !== 200) expect(answer.headers['retry-after']).toBeDefined();
  }
  // The connection that prepared the sign-in answers first (the pool hands out the last one used).
  expect(statuses[0]).toBe(503);
  expect(statuses.at(-1)).toBe(200);
  expect(statuses.slice(0, -1).every((status) => status === 503)).toBe(true);
});
