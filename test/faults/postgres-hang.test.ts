import type { PrivatePostgres } from '@tessera/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { startOnPrivatePostgres, type Tessera } from './tessera.ts';

// Postgres hung (SIGSTOP: connections open, nothing answers, as a frozen host or a partition) while
// requests hold every pooled connection: an outage, not a busy gateway. The requests after them
// answer 503 DEPENDENCY_UNAVAILABLE once the readiness probe's own connection has found Postgres
// silent twice, readiness fails, and all is served again once Postgres answers; the requests it
// froze on answer 503 too, once their statements' deadline has passed and the probe found it silent.

let fault: Awaited<ReturnType<typeof startOnPrivatePostgres>>;
let postgres: PrivatePostgres;
let databaseUrl: string;
let tessera: Tessera;

beforeAll(async () => {
  // Long enough that Postgres has frozen before it would cancel the statements waiting on a lock.
  fault = await startOnPrivatePostgres({ DATABASE_POOL_SIZE: '2', DATABASE_STATEMENT_TIMEOUT: '8' });
  ({ postgres, databaseUrl, tessera } = fault);
  tessera.startMailer();
});
afterAll(() => fault?.remove());

it('is an outage, not a busy pool, and is served again once Postgres answers', {
  timeout: 60_000,
}, async () => {
  const email = 'frozen@example.com';
  const code = await tessera.codeByEmail(email);
  const { json } = await tessera.call('POST', '/api/v1/auth/verify-otp-email', { email, code });
  const { accessToken } = json.data;
  const me = () => tessera.call('GET', '/api/v1/users/me', undefined, accessToken);
  expect((await me()).status).toBe(200);

  // Two requests take the pool's two connections, waiting behind a lock; then Postgres freezes.
  const operator = new pg.Client({ connectionString: databaseUrl });
  await operator.connect();
  await operator.query('begin');
  await operator.query('lock table users in access exclusive mode');
  // Their client waits longer than the gateway may: DATABASE_STATEMENT_TIMEOUT, 1 s, and the probe's 3.
  const held = [1, 2].map(async () => {
    const response = await fetch(`${tessera.baseUrl}/api/v1/users/me`, {
      headers: { authorization: `Bearer ${accessToken}` },
      signal: AbortSignal.timeout(30_000),
    });
    return [response.status, response.headers.get('tessera-error-code')];
  });
  const watcher = new pg.Client({ connectionString: databaseUrl });
  await watcher.connect();
  await vi.waitFor(
    async () => {
      const { rows } = await watcher.query(
        "select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
      );
      expect(rows).toHaveLength(2);
    },
    { timeout: 5000 },
  );
  await watcher.end();
  await postgres.pause();
  try {
    // The first wait that runs out is taken for a busy pool: the probe has not yet gone unanswered
    // twice (3 s each). The next ones find the outage.
    const codes: (string | null)[] = [];
    for (let i = 0; i < 5 && codes.at(-1) !== 'DEPENDENCY_UNAVAILABLE'; i++) {
      const answer = await me();
      expect(answer.status).toBe(503);
      expect(answer.headers.get('retry-after')).toBe('5');
      codes.push(answer.headers.get('tessera-error-code'));
    }
    expect(codes[0]).toBe('SERVER_BUSY');
    expect(codes.at(-1)).toBe('DEPENDENCY_UNAVAILABLE');
    expect((await fetch(`${tessera.baseUrl}/health/ready`)).status).toBe(503);
    // The requests whose statements Postgres had taken are answered too, while it is still silent:
    // their statements' deadline passed, and the probe found Postgres silent.
    const outage = [503, 'DEPENDENCY_UNAVAILABLE'];
    expect(await Promise.all(held)).toEqual([outage, outage]);
  } finally {
    await postgres.resume();
    await operator.query('rollback').catch(() => {});
    await operator.end();
  }
  await tessera.readyAgain();
  expect((await me()).status).toBe(200);
});
