import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { SEND_OTP_JOB } from '@tessera/contracts';
import { closeRedis, createRedis, durabilityProblems } from '@tessera/redis';
import { startOperationsServer } from '@tessera/telemetry';
import {
  type RedisCluster,
  type ServiceProcess,
  type SmtpSink,
  startRedisCluster,
  startService,
  startSmtpSink,
} from '@tessera/testing';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { runLimitsCli } from '../src/limits-cli.ts';
import { bearer, body, envBeside, post, startGateway, type TestGateway } from './helpers.ts';

// The gateway and a mailer on a Redis Cluster of three masters of this test's own, as
// REDIS_CLUSTER_NODES selects it: each script, each multi-key command and the queue keep to one slot.

const SEND = '/api/v1/auth/send-otp-email';
const VERIFY = '/api/v1/auth/verify-otp-email';

let cluster: RedisCluster;
let sink: SmtpSink;
let gateway: TestGateway;
let mailer: ServiceProcess;

beforeAll(async () => {
  [cluster, sink] = await Promise.all([startRedisCluster(), startSmtpSink()]);
  const redis = {
    REDIS_URL: `redis://${cluster.nodes.split(',')[0]}`,
    REDIS_CLUSTER_NODES: cluster.nodes,
    BULLMQ_PREFIX: '{tessera-cluster-test}',
  };
  gateway = await startGateway({
    ...redis,
    OTP_RESEND_COOLDOWN: '5',
    OTP_MAX_SENDS_PER_EMAIL_PER_HOUR: '3',
    RATE_LIMIT_MAX: '30',
  });
  mailer = startService('mailer', {
    APP_ENV: 'test',
    LOG_LEVEL: 'warn',
    ...redis,
    SMTP_URL: sink.url,
    MAILER_METRICS_PORT: '0',
  });
});

afterAll(async () => {
  await mailer?.stop();
  await gateway?.close();
  await Promise.all([sink?.close(), cluster?.remove()]);
});

describe('on a Redis Cluster', () => {
  it('signs in, refreshes, lists and logs out, with the code emailed through the mailer', async () => {
    const { app } = gateway;
    const email = 'cluster@example.com';
    const sent = await post(app, SEND, { email });
    expect(sent.statusCode).toBe(200);
    const { code } = body(sent).data;
    // The resend cooldown counts by Redis's clock: refused now, allowed once it has passed (below).
    expect((await post(app, SEND, { email })).statusCode).toBe(429);
    const mail = await sink.waitFor((m) => m.to.includes(email));
    expect(mail.text).toContain(code);

    const wrong = String((Number(code) + 1) % 10_000).padStart(4, '0');
    expect((await post(app, VERIFY, { email, code: wrong })).statusCode).toBe(400);
    const first = body(await post(app, VERIFY, { email, code })).data;
    expect(first.accessToken).toEqual(expect.any(String));
    expect((await post(app, VERIFY, { email, code })).statusCode).toBe(404);

    // Once the cooldown has passed, waiting as each refusal tells, the address gets a new code.
    let resent = await post(app, SEND, { email });
    while (resent.statusCode === 429) {
      await sleep(Number(resent.headers['retry-after']) * 1000);
      resent = await post(app, SEND, { email });
    }
    expect(resent.statusCode).toBe(200);
    const verified = await post(app, VERIFY, { email, code: body(resent).data.code });
    expect(verified.statusCode).toBe(200);
    const second = body(verified).data;

    const refreshed = await post(app, '/api/v1/auth/refresh-token', { refreshToken: first.refreshToken });
    expect(refreshed.statusCode).toBe(200);
    const sessions = await app.inject({ url: '/api/v1/auth/sessions', headers: bearer(second.accessToken) });
    expect(body(sessions).data.pagination.totalItems).toBe(2);
    const loggedOut = await post(app, '/api/v1/auth/logout', {}, bearer(second.accessToken));
    expect(body(loggedOut).data).toEqual({ revokedSessions: 2 });
    const after = await app.inject({ url: '/api/v1/auth/sessions', headers: bearer(second.accessToken) });
    expect(after.statusCode).toBe(401);
  });

  it("counts a +tag address's sends in its inbox's budget, whose key is in another slot", async () => {
    const sendTo = (email: string) =>
      gateway.app.inject({ method: 'POST', url: SEND, payload: { email }, remoteAddress: '192.0.2.2' });
    for (const email of ['inbox@example.com', 'inbox+1@example.com', 'inbox+2@example.com'])
      expect((await sendTo(email)).statusCode).toBe(200);
    const refused = await sendTo('inbox+3@example.com');
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(3500);

    // An operator's lift reaches the inbox's key too, in its own slot.
    const out = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const env = { ...envBeside(gateway), REDIS_CLUSTER_NODES: cluster.nodes };
      expect(await runLimitsCli(['lift', '--email', 'inbox+3@example.com', '--json'], env)).toBe(0);
      expect(JSON.parse(String(out.mock.calls[0]?.[0]))).toMatchObject({ codesSent: 3 });
    } finally {
      out.mockRestore();
    }
    expect((await sendTo('inbox+3@example.com')).statusCode).toBe(200);
  });

  it('answers 429 past the general per-IP limit', async () => {
    const jwks = () => gateway.app.inject({ url: '/.well-known/jwks.json', remoteAddress: '192.0.2.1' });
    for (let i = 0; i < 30; i++) expect((await jwks()).statusCode).toBe(200);
    expect((await jwks()).statusCode).toBe(429);
  });

  it('checks every master for settings that would lose queued jobs', async () => {
    const client = createRedis({ url: 'redis://', clusterNodes: cluster.nodes }, 'commands', () => {});
    await client.connect();
    try {
      const problems = await durabilityProblems(client);
      expect(problems.sort()).toEqual(
        cluster.nodes
          .split(',')
          .map((node) => `${node} appendonly=no, want yes`)
          .sort(),
      );
    } finally {
      await closeRedis(client);
    }
  });

  it("tells how long the next email has waited, reading its job's timestamp in the queue's slot", async () => {
    await mailer.stop();
    const operations = await startOperationsServer({
      host: '127.0.0.1',
      port: 0,
      checks: gateway.app.readiness,
    });
    onTestFinished(() => operations.close());
    await gateway.app.mailQueue.drain();
    await gateway.app.mailQueue.add(SEND_OTP_JOB, {}, { timestamp: Date.now() - 90_000 });
    const metrics = await (await fetch(`${operations.url}/metrics`)).text();
    const age = Number(/^tessera_email_queue_oldest_waiting_seconds (\S+)$/m.exec(metrics)?.[1]);
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThan(120);
  });
});

describe('one node of a Redis Cluster given as REDIS_URL alone', () => {
  const MOVED =
    'REDIS_URL is a node of a Redis Cluster, which a client of one server cannot use (MOVED, CROSSSLOT): name its nodes in REDIS_CLUSTER_NODES';
  const oneNode = () => ({ REDIS_URL: `redis://${cluster.nodes.split(',')[0]}`, REDIS_CLUSTER_NODES: '' });

  it('stops the gateway at start, where it would answer most requests 500', async () => {
    await expect(startGateway(oneNode())).rejects.toThrow(MOVED);
  });

  it("stops an operator's command with that line", async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const env = { ...envBeside(gateway), ...oneNode() };
      expect(await runLimitsCli(['lift', '--email', 'someone@example.com'], env)).toBe(1);
      expect(err.mock.calls.join('\n')).toBe(`limits lift: ${MOVED}`);
    } finally {
      err.mockRestore();
    }
  });

  it('stops the mailer, saying why', async () => {
    const alone = startService('mailer', {
      APP_ENV: 'test',
      ...oneNode(),
      BULLMQ_PREFIX: '{tessera-cluster-test}',
      SMTP_URL: sink.url,
      MAILER_METRICS_PORT: '0',
    });
    const [code] = (await once(alone.child, 'exit')) as [number | null];
    expect(code, alone.output()).toBe(1);
    expect(alone.output()).toContain(`"msg":"${MOVED}: stopping"`);
    expect(alone.output()).not.toContain('mailer ready');
    // What its worker meets there from then on is that line's, not an error of its own.
    expect(alone.output().slice(alone.output().indexOf(': stopping"'))).not.toContain('"level":50');
  });
});
