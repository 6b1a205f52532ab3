import { afterAll, beforeAll, expect, it } from 'vitest';
import { holdRequests, startOnPrivateRedis } from './tessera.ts';

// Clients that fill the gateway's connections (MAX_CONNECTIONS, 4,096 by default) with requests whose
// headers never end, each as heavy as it may be, against the gateway as production runs it (a
// 128 MB old space): what it holds of them must fit, so that it answers again once they are gone.

const MAX_CONNECTIONS = 4096;

let fault: Awaited<ReturnType<typeof startOnPrivateRedis>>;
beforeAll(async () => {
  fault = await startOnPrivateRedis();
});
afterAll(() => fault?.remove());

const START = 'POST /api/v1/auth/send-otp-email HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n';
/** Header lines of `each` bytes, `count` of them, CRLF included. */
const lines = (count: number, each: number) =>
  Array.from(
    { length: count },
    (_, i) => `x-${String(i).padStart(4, '0')}: ${'v'.repeat(each - 10)}\r\n`,
  ).join('');

it('refuses headers past 100 lines or 8 KB at once, and survives every connection held with the most it allows', {
  timeout: 120_000,
}, async () => {
  const hold = (count: number, head: string) => holdRequests(fault.tessera.baseUrl, count, head);
  const gatewayAlive = () => fault.tessera.gateway.child.exitCode === null;

  // 900 short header lines (Node alone reads up to about 950), the headers unended: 431 at once, the
  // connection closed.
  const many = await hold(MAX_CONNECTIONS, START + lines(900, 11));
  const answers = await Promise.all(many.answers);
  expect(gatewayAlive(), fault.tessera.gateway.output().slice(-2000)).toBe(true);
  expect(new Set(answers.map((answer) => answer.split('\r\n')[0]))).toEqual(
    new Set(['HTTP/1.1 431 Request Header Fields Too Large']),
  );
  expect(JSON.parse(answers[0]?.split('\r\n\r\n')[1] ?? '')).toMatchObject({
    isSuccess: false,
    statusCode: 431,
  });

  // 150 lines of 2 KB in all, under the byte limit: 431 too.
  const lined = await hold(1, `${START + lines(150, 12)}\r\n`);
  expect((await Promise.all(lined.answers))[0]).toMatch(/^HTTP\/1\.1 431 /);

  // Just under both limits, on every connection the gateway keeps: held until the clients let go.
  const heavy = await hold(MAX_CONNECTIONS, START + lines(95, 84));
  await new Promise((resolve) => setTimeout(resolve, 2000));
  expect(gatewayAlive(), fault.tessera.gateway.output().slice(-2000)).toBe(true);
  for (const socket of heavy.sockets) socket.destroy();

  const sent = await fault.tessera.call('POST', '/api/v1/auth/send-otp-email', {
    email: 'after.held@example.com',
  });
  expect(sent.status).toBe(200);
});
