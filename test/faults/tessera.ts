import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { migrateToLatest } from '@tessera/infra';
import {
  createDatabase,
  createTestDatabase,
  createTestRedis,
  jsonClient,
  type ProcessLimits,
  type ServiceProcess,
  type SmtpSink,
  startGatewayProcess,
  startPrivatePostgres,
  startPrivateRedis,
  startService,
  startSmtpSink,
  waitUntil,
} from '@tessera/testing';

// Tessera as an operator runs it, for the fault tests: the gateway and the mailer as processes in
// production mode, pointed at the servers the test owns.

const GATEWAY_DIR = fileURLToPath(new URL('../../services/auth-gateway', import.meta.url));

export interface Backends {
  databaseUrl: string;
  redisUrl: string;
  /** Key prefixes, when the Redis is shared with other tests. */
  keyPrefix?: string;
  bullmqPrefix?: string;
  sink: SmtpSink;
}

export interface Tessera {
  baseUrl: string;
  /** The gateway's operations port (metrics, health). */
  opsUrl: string;
  gateway: ServiceProcess;
  /** Starts a mailer process (as many as the test wants), with `env` besides the shared settings. */
  startMailer(env?: Record<string, string>): ServiceProcess;
  call: ReturnType<typeof jsonClient>;
  /** Requests a code for `email` and reads it from the email the mailer delivered. */
  codeByEmail(email: string): Promise<string>;
  /** Runs an operator's command of the gateway (`src/limits-cli.ts show …`) with the gateway's settings. */
  command(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Waits until the gateway's readiness probe answers 200 again (after a dependency came back). */
  readyAgain(): Promise<void>;
  stop(): Promise<void>;
}

export async function startTessera(
  backends: Backends,
  env: Record<string, string> = {},
  gatewayLimits: ProcessLimits = {},
): Promise<Tessera> {
  const { sink } = backends;
  const shared = {
    APP_ENV: 'production',
    LOG_LEVEL: 'warn',
    REDIS_URL: backends.redisUrl,
    MAIL_JOB_KEY: `faults:${randomBytes(32).toString('base64')}`,
    ...(backends.bullmqPrefix && { BULLMQ_PREFIX: backends.bullmqPrefix }),
    SHUTDOWN_TIMEOUT: '10',
    ...env,
  };
  const gatewayEnv = {
    ...shared,
    // Its listening address, which startGatewayProcess waits for, is logged at info.
    LOG_LEVEL: 'info',
    DATABASE_URL: backends.databaseUrl,
    ...(backends.keyPrefix && { REDIS_KEY_PREFIX: backends.keyPrefix }),
    JWT_PRIVATE_KEY: generateKeyPairSync('ed25519')
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString(),
    OTP_SECRET: 'faults-otp-secret-0123456789abcdef0123456789',
    OTP_RESEND_COOLDOWN: '0',
  };
  const { gateway, url: baseUrl, opsUrl } = await startGatewayProcess(gatewayEnv, gatewayLimits);
  const mailers: ServiceProcess[] = [];

  const call = jsonClient(baseUrl);

  const seen = new Set<object>();

  return {
    baseUrl,
    opsUrl,
    gateway,
    startMailer(env = {}) {
      const mailer = startService('mailer', {
        ...shared,
        SMTP_URL: sink.url,
        MAIL_FROM: 'Tessera <no-reply@tessera.test>',
        MAILER_METRICS_PORT: '0',
        ...env,
      });
      mailers.push(mailer);
      return mailer;
    },
    call,
    async codeByEmail(email) {
      const sent = await call('POST', '/api/v1/auth/send-otp-email', { email });
      if (sent.status !== 200) throw new Error(`send-otp-email: ${sent.status} ${sent.json.errors}`);
      const mail = await sink.waitFor((m) => m.to.includes(email) && !seen.has(m));
      seen.add(mail);
      return /\b(\d{4})\b/.exec(mail.subject)?.[1] ?? '';
    },
    command: (args) =>
      new Promise((resolve) => {
        const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...gatewayEnv };
        execFile(
          process.execPath,
          args,
          { cwd: GATEWAY_DIR, env, timeout: 30_000 },
          (error, stdout, stderr) =>
            resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
        );
      }),
    readyAgain: () =>
      waitUntil('gateway ready again', () =>
        fetch(`${baseUrl}/health/ready`).then(
          (r) => r.ok,
          () => false,
        ),
      ),
    async stop() {
      await Promise.all([gateway, ...mailers].map((service) => service.stop('SIGKILL')));
    },
  };
}

/**
 * Tessera (with `env` besides the defaults) on a redis-server of the test's own (started with
 * `redisArgs`), with a database and an SMTP sink of its own; `remove` stops Tessera and removes all three.
 */
export async function startOnPrivateRedis(
  redisArgs: string[] = [],
  env: Record<string, string> = {},
  gatewayLimits: ProcessLimits = {},
) {
  const [redis, database, sink] = await Promise.all([
    startPrivateRedis(redisArgs),
    createTestDatabase(),
    startSmtpSink(),
  ]);
  const removeBackends = () => Promise.all([redis.remove(), database.drop(), sink.close()]);
  const tessera = await startTessera(
    { databaseUrl: database.url, redisUrl: redis.url, sink },
    env,
    gatewayLimits,
  ).catch(async (error: unknown) => {
    await removeBackends();
    throw error;
  });
  return {
    redis,
    sink,
    tessera,
    async remove() {
      await tessera.stop();
      await removeBackends();
    },
  };
}

/**
 * Tessera (with `env` besides the defaults) on a Postgres server of the test's own, its database
 * migrated, with a Redis namespace and an SMTP sink of its own; `remove` stops Tessera and removes
 * all three.
 */
export async function startOnPrivatePostgres(env: Record<string, string> = {}) {
  const [postgres, sink] = await Promise.all([startPrivatePostgres(), startSmtpSink()]);
  const redis = createTestRedis();
  const removeBackends = () => Promise.all([postgres.remove(), redis.flush(), sink.close()]);
  try {
    const databaseUrl = await createDatabase(postgres.adminUrl, 'tessera');
    await migrateToLatest(databaseUrl);
    const tessera = await startTessera(
      {
        databaseUrl,
        redisUrl: redis.url,
        keyPrefix: redis.keyPrefix,
        bullmqPrefix: redis.bullmqPrefix,
        sink,
      },
      env,
    );
    return {
      postgres,
      databaseUrl,
      tessera,
      async remove() {
        await tessera.stop();
        await removeBackends();
      },
    };
  } catch (error) {
    await removeBackends();
    throw error;
  }
}

/**
 * `count` connections to the gateway at `baseUrl` that each send `head` and then nothing, as clients
 * holding requests do; resolves once all have sent it (a refused one sends nothing: the gateway is
 * gone, which the test tells with its output). `answers`: what each got until it was closed.
 */
export async function holdRequests(baseUrl: string, count: number, head: string) {
  const port = Number(new URL(baseUrl).port);
  const sockets: net.Socket[] = [];
  const answers: Promise<string>[] = [];
  for (let i = 0; i < count; i++) {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.on('error', () => {});
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk;
    });
    answers.push(new Promise((resolve) => socket.on('close', () => resolve(received))));
    sockets.push(socket);
    const connected = await once(socket, 'connect').then(
      () => true,
      () => false,
    );
    if (connected) socket.write(head);
  }
  return { sockets, answers };
}
