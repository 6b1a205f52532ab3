import { performance } from 'node:perf_hooks';
import { EMAIL_QUEUE } from '@tessera/contracts';
import { SERVICE_ARGS } from '@tessera/infra/bundle';
import { Queue } from 'bullmq';
import { percentile } from './http-load.ts';
import { meter } from './meter.ts';
import { type Memory, memoryOf, NO_MEMORY } from './proc-stats.ts';
import { freePort, runtimeEnv, startService, waitUntilReady } from './processes.ts';
import type { Row } from './report.ts';
import { startSmtpSink } from './smtp-sink.ts';
import { baseEnv, QUEUE_PREFIX, SERVICE_NAMES, type Target, tracingEnv } from './target.ts';

export interface MailDrainShape {
  /**
   * Codes asked for one at a time, each waited for, to measure send → accepted with the mailer idle;
   * after the first email, whose latency is told apart (it opens the SMTP connection).
   */
  idleSamples: number;
  /** Code emails queued while the queue is paused, then drained at once. */
  emails: number;
}

export interface MailDrainResult {
  row: Row;
  /** Mailer memory once started, before any email. */
  memoryIdle: Memory;
  /** Send → accepted of the first email after the mailer started, ms. */
  firstEmailMs: number;
}

/**
 * The mailer of the target's revision, at its default settings, sending into an SMTP sink on
 * loopback. The emails are queued by the gateway (send code), so each revision's jobs have its own
 * format. First one code, then `idleSamples` codes one after the other (latency), then `emails`
 * queued while the queue is paused and released at once (throughput, and the CPU it costs the
 * mailer and Redis).
 */
export async function measureMailDrain(target: Target, shape: MailDrainShape): Promise<MailDrainResult> {
  const { hostname, port } = new URL(target.redis.url);
  const queue = new Queue(EMAIL_QUEUE, {
    connection: { host: hostname, port: Number(port) },
    prefix: QUEUE_PREFIX,
  });
  // The codes of the HTTP flows, queued with no mailer running, are not part of the drain.
  await queue.drain(true);
  const sink = await startSmtpSink();
  const opsPort = await freePort();
  const mailer = startService(`mailer (${target.label})`, process.execPath, SERVICE_ARGS.mailer, {
    cwd: target.root,
    pinning: target.pinning,
    env: {
      ...baseEnv(),
      ...runtimeEnv(target.root),
      APP_ENV: 'test',
      LOG_LEVEL: target.logLevel,
      REDIS_URL: target.redis.url,
      BULLMQ_PREFIX: QUEUE_PREFIX,
      SMTP_URL: sink.url,
      MAIL_FROM: 'Tessera bench <bench@tessera.test>',
      MAILER_METRICS_PORT: String(opsPort),
      MAILER_METRICS_HOST: '127.0.0.1',
      ...tracingEnv(target.otlpEndpoint, SERVICE_NAMES.mailer),
    },
  });
  // Stopped below once measured, and by the run's cleanup should a signal end the run first.
  target.cleanup.add(`stop ${mailer.name}`, () => mailer.stop());
  try {
    await waitUntilReady(mailer, async () => (await fetch(`http://127.0.0.1:${opsPort}/health/ready`)).ok);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const memoryIdle = memoryOf(mailer.pid) ?? NO_MEMORY;
    const { client, population } = target;

    const sendAndWait = async () => {
      const email = population.freshEmail('idle-mail');
      const asked = performance.now();
      await client.sendCode(email);
      await sink.waitFor([email], 10_000).catch((error: Error) => {
        throw new Error(`${mailer.name}: ${error.message}; its output:\n${mailer.output()}`);
      });
      return (sink.accepted.get(email) ?? Number.NaN) - asked;
    };
    const firstEmailMs = await sendAndWait();
    const latencies: number[] = [];
    for (let i = 0; i < shape.idleSamples; i++) latencies.push(await sendAndWait());

    await queue.pause();
    const emails = Array.from({ length: shape.emails }, () => population.freshEmail('mail'));
    await population.sendCodes(emails);
    let released = 0;
    const { usage } = await meter({ service: mailer.pid, redis: target.redis.service.pid }, async () => {
      released = performance.now();
      await queue.resume();
      // Generous: the mailer sent about 50 emails a second when this bench was written.
      await sink.waitFor(emails, Math.max(60_000, shape.emails * 50)).catch(() => {});
    });
    const times = emails.map((email) => sink.accepted.get(email)).filter((time) => time !== undefined);
    const delivered = times.length;
    // Not Math.max(...times): a spread of some 200,000 arguments overflows the stack.
    const last = times.reduce((latest, time) => Math.max(latest, time), Number.NEGATIVE_INFINITY);
    const seconds = delivered > 0 ? (last - released) / 1000 : Number.NaN;
    const sorted = Float64Array.from(latencies).sort();
    return {
      memoryIdle,
      firstEmailMs,
      row: {
        name: 'mail-drain',
        title: 'mailer drain',
        ops: delivered,
        failures: delivered < shape.emails ? { 'not delivered': shape.emails - delivered } : {},
        seconds,
        rate: delivered / seconds,
        p50: percentile(sorted, 0.5),
        p99: percentile(sorted, 0.99),
        cpuMsPerOp: {
          service: usage.cpuMs.service / delivered,
          postgres: undefined,
          redis: usage.cpuMs.redis / delivered,
        },
        memoryPeak: usage.memoryPeak,
        loadGeneratorBusy: usage.loadGeneratorBusy,
      },
    };
  } finally {
    await queue.close();
    await mailer.stop();
    await sink.close();
  }
}
