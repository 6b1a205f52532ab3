import { afterAll, beforeAll, expect, it } from 'vitest';
import { holdRequests, startOnPrivateRedis } from './tessera.ts';

// A gateway that may open few files (`ulimit -n` 256, as some hosts and container runtimes set it)
// with MAX_CONNECTIONS left at 4,096: it keeps fewer connections, says so at start, and clients that
// hold them all leave its probes, and its Postgres and Redis connections, the descriptors they need.

const OPEN_FILES = 256;

let fault: Awaited<ReturnType<typeof startOnPrivateRedis>>;
beforeAll(async () => {
  fault = await startOnPrivateRedis([], {}, { openFiles: OPEN_FILES });
});
afterAll(() => fault?.remove());

it('keeps fewer connections than its open files allow, says so, and stays live and ready while clients hold them', {
  timeout: 60_000,
}, async () => {
  const { tessera } = fault;
  const warning = tessera.gateway.logLines().find((line) => line.maxConnections === 4096);
  expect(warning).toMatchObject({ level: 40, openFileLimit: OPEN_FILES, kept: expect.any(Number) });
  expect(warning?.msg).toMatch(/raise the limit/);
  const kept: number = warning?.kept;
  expect(kept).toBeLessThan(OPEN_FILES);

  // Twice as many clients as the file limit, each with a request that never ends.
  const { sockets, answers } = await holdRequests(
    tessera.baseUrl,
    2 * OPEN_FILES,
    'POST /api/v1/auth/send-otp-email HTTP/1.1\r\nHost: t\r\n',
  );
  let closed = 0;
  for (const answer of answers) void answer.then(() => closed++);
  await expect.poll(() => closed, { timeout: 10_000 }).toBe(2 * OPEN_FILES - kept);

  // Its probes answer meanwhile, on the operations port, and Postgres and Redis are reached.
  expect((await fetch(`${tessera.opsUrl}/health/live`)).status).toBe(200);
  expect((await fetch(`${tessera.opsUrl}/health/ready`)).status).toBe(200);
  const metrics = await (await fetch(`${tessera.opsUrl}/metrics`)).text();
  expect(metrics).toContain(`tessera_http_connections_refused_total ${2 * OPEN_FILES - kept}`);

  for (const socket of sockets) socket.destroy();
  const sent = await tessera.call('POST', '/api/v1/auth/send-otp-email', { email: 'few.files@example.com' });
  expect(sent.status).toBe(200);
});
