import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { startOperationsServer } from '@tessera/telemetry';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { bearer, signIn, startGateway, type TestGateway } from './helpers.ts';

// Clients that open connections and never finish a request, as an attacker's do: each would hold a
// connection, and the heap behind it, for as long as it liked.
let gateway: TestGateway;
let port: number;
/** A gateway of `env`, listening on `port`. */
async function listening(env: Record<string, string>) {
  gateway = await startGateway(env);
  await gateway.app.listen({ port: 0, host: '127.0.0.1' });
  port = (gateway.app.server.address() as AddressInfo).port;
}
afterEach(() => gateway.close());

/** The value of one series of the gateway's metrics (process-wide), 0 before it first appears. */
async function metric(series: string): Promise<number> {
  const operations = await startOperationsServer({
    host: '127.0.0.1',
    port: 0,
    checks: gateway.app.readiness,
  });
  try {
    const text = await (await fetch(`${operations.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line ? Number(line.slice(series.length + 1).split(' ')[0]) : 0;
  } finally {
    await operations.close();
  }
}

/** A connection (from `localAddress`, a client of its own), with all the server sends until it closes it. */
function connect(localAddress = '127.0.0.1') {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress });
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += chunk;
  });
  socket.on('error', () => {});
  const closed = new Promise<string>((resolve) => socket.on('close', () => resolve(received)));
  // A connection refused at once fails with a reset: what `closed` tells, so no rejection here.
  const connected = once(socket, 'connect').catch(() => {});
  return { socket, closed, connected };
}

const UNFINISHED_POST =
  'POST /api/v1/auth/send-otp-email HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"em';

describe('a client that does not finish its request', () => {
  beforeEach(() => listening({ REQUEST_TIMEOUT: '1', RATE_LIMIT_MAX: '1' }));

  it('gets a 408 envelope after REQUEST_TIMEOUT, and its connection is closed', async () => {
    const timedOut = 'tessera_errors_total{code="REQUEST_TIMEOUT"}';
    const before = await metric(timedOut);
    const client = connect();
    client.socket.write(UNFINISHED_POST);
    const answer = await client.closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(await metric(timedOut)).toBe(before + 1);
    expect(JSON.parse(answer.split('\r\n\r\n')[1] ?? '')).toMatchObject({
      isSuccess: false,
      statusCode: 408,
    });
  });

  it('is closed too after a 429, which came before its body, with no second answer', async () => {
    // RATE_LIMIT_MAX is 1: the first request of this address takes it, the second is refused.
    const first = connect('127.0.0.2');
    first.socket.write('GET /.well-known/jwks.json HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    expect(await first.closed).toMatch(/^HTTP\/1\.1 200 /);
    const refused = connect('127.0.0.2');
    refused.socket.write(UNFINISHED_POST);
    // Closed without a second answer: a 408 after the 429 would be read as the answer to a next request.
    const answer = await refused.closed;
    expect(answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(answer.match(/HTTP\/1\.1 \d{3}/g)).toHaveLength(1);
  });

  it('with headers sent a byte at a time is closed after REQUEST_TIMEOUT too', async () => {
    const client = connect();
    await client.connected;
    const dripping = setInterval(() => client.socket.write('X'), 100);
    client.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\nX-Slow: ');
    const answer = await client.closed.finally(() => clearInterval(dripping));
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('while the gateway drains', () => {
  // Long enough for the set-up below to come well within it.
  beforeEach(() => listening({ REQUEST_TIMEOUT: '4' }));

  it('a client that does not finish its request still gets its 408 at REQUEST_TIMEOUT, and the drain ends; a request in flight finishes', async () => {
    const { accessToken, user } = await signIn(gateway.app, 'draining@example.com');
    // Another transaction holds the user's row: a profile change waits for it, in flight.
    const holder = new pg.Client({ connectionString: gateway.config.database.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select * from users where id = $1 for update', [user._id]);
      const change = JSON.stringify({ name: 'Ada' });
      const inFlight = connect();
      inFlight.socket.write(
        `PATCH /api/v1/users/me HTTP/1.1\r\nHost: t\r\nAuthorization: ${bearer(accessToken).authorization}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${change.length}\r\n\r\n${change}`,
      );
      const [body, head] = [connect(), connect()];
      body.socket.write(UNFINISHED_POST);
      head.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\n');
      const waiting = async () =>
        (
          await holder.query(
            "select 1 from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()",
          )
        ).rowCount;
      await expect.poll(waiting).toBe(1);
      await expect
        .poll(() => new Promise((resolve) => gateway.app.server.getConnections((_, count) => resolve(count))))
        .toBe(3);

      // Node stops timing requests once the server closes (SIGTERM's drain): without the drain's own
      // timing, both would wait, and hold the drain, for as long as their clients liked.
      const drained = gateway.app.close();
      const answered = (client: ReturnType<typeof connect>) =>
        Promise.race([
          client.closed.then(() => true),
          new Promise((resolve) => setTimeout(resolve, 1500, false)),
        ]);
      // Not before their time: REQUEST_TIMEOUT holds during the drain as before it.
      expect(await answered(body)).toBe(false);
      for (const unfinished of [body, head]) expect(await unfinished.closed).toMatch(/^HTTP\/1\.1 408 /);
      expect(await waiting()).toBe(1);
      await holder.query('rollback');
      const answer = await inFlight.closed;
      expect(answer).toMatch(/^HTTP\/1\.1 200 /);
      expect(answer.match(/HTTP\/1\.1 \d{3}/g)).toHaveLength(1);
      await drained;
    } finally {
      await holder.end();
    }
  });
});

describe('connections', () => {
  beforeEach(() => listening({ REQUEST_TIMEOUT: '60', MAX_CONNECTIONS: '3' }));
  const openConnections = () =>
    new Promise((resolve) => gateway.app.server.getConnections((_, count) => resolve(count)));

  it('are at most MAX_CONNECTIONS: more are closed as they arrive, and taken again once one is free', async () => {
    const refused = 'tessera_http_connections_refused_total';
    const before = await metric(refused);
    const held = [connect(), connect(), connect()];
    for (const client of held) client.socket.write(UNFINISHED_POST);
    await expect.poll(openConnections).toBe(3);
    expect(await metric('tessera_http_connections_open')).toBe(3);
    const extra = connect();
    extra.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n');
    expect(await extra.closed).toBe('');
    expect(await metric(refused)).toBe(before + 1);

    held[0]?.socket.destroy();
    await expect.poll(openConnections).toBe(2);
    const next = connect();
    next.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    expect(await next.closed).toMatch(/^HTTP\/1\.1 200 /);
    for (const client of held) client.socket.destroy();
  });

  it('that fill the cap cannot keep it filled: near it, every answer closes its connection', async () => {
    const clients = [connect(), connect(), connect()];
    await expect.poll(openConnections).toBe(3);
    for (const client of clients) client.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n');
    for (const client of clients)
      expect(await client.closed).toMatch(/^HTTP\/1\.1 200 [\s\S]*connection: close/i);
    const next = connect();
    next.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    expect(await next.closed).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('kept alive between requests make room near the cap, so that clients idling cannot lock others out', async () => {
    const idle = [connect(), connect(), connect()];
    for (const client of idle) {
      await client.connected;
      const answered = once(client.socket, 'data');
      client.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n');
      await answered;
    }
    const next = connect();
    next.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    expect(await next.closed).toMatch(/^HTTP\/1\.1 200 /);
    // The first two were closed when the third came, near the cap; the third answered its request.
    expect(await idle[0]?.closed).toMatch(/^HTTP\/1\.1 200 /);
    for (const client of idle) client.socket.destroy();
  });
});

describe('a connection kept alive', () => {
  beforeEach(() => listening({ KEEP_ALIVE_TIMEOUT: '2' }));

  it('idle, stays open KEEP_ALIVE_TIMEOUT for a proxy to send its next request on, and is then closed', async () => {
    const client = connect();
    await client.connected;
    const answered = () => once(client.socket, 'data');
    let first = answered();
    client.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n');
    await first;
    // The answer says how long the connection stays; a proxy keeping its own longer gets a 502 now and then.
    first = answered();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    client.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n');
    await first;
    const started = performance.now();
    const received = await client.closed;
    expect(received.match(/HTTP\/1\.1 200 /g)).toHaveLength(2);
    expect(received).toMatch(/^keep-alive: timeout=2\r$/im);
    // Closed by the gateway, idle: 2 s and Node's 1 s later (72 s by default).
    expect(performance.now() - started).toBeGreaterThan(1500);
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe('a client that leaves at once', () => {
  beforeEach(() => listening({}));

  it('resetting its connection as it sends a request, is no error of the gateway', async () => {
    const internal = 'tessera_errors_total{code="INTERNAL"}';
    const before = await metric(internal);
    for (let round = 0; round < 20; round += 1) {
      const client = connect();
      await client.connected;
      client.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\n\r\n');
      client.socket.resetAndDestroy();
      await client.closed;
    }
    // Answered on a connection of its own: the gateway still serves.
    const after = connect();
    after.socket.write('GET /health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    expect(await after.closed).toMatch(/^HTTP\/1\.1 200 /);
    expect(await metric(internal)).toBe(before);
  });

  it('sending CONNECT and then a byte now and then, is cut off all the same', async () => {
    // Half-open: its side stays open after the answer, as a client holding connections keeps it.
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk;
    });
    // A byte written as the gateway cuts it off fails (EPIPE): that is the point.
    socket.on('error', () => {});
    const closed = new Promise((resolve) => socket.on('close', resolve));
    await once(socket, 'connect');
    socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    // Each byte would restart an idle timeout: the connection must end anyway.
    const trickle = setInterval(() => socket.write('x'), 500);
    try {
      await closed;
      expect(received).toMatch(/^HTTP\/1\.1 400 /);
    } finally {
      clearInterval(trickle);
    }
  });
});
