import { parseArgs } from 'node:util';
import { EMAIL_QUEUE, type SendOtpJobData } from '@tessera/contracts';
import { createRedis, type RedisClient } from '@tessera/redis';
import { Queue } from 'bullmq';
import { loadQueueConfig } from './config.ts';
import { type QueueStatus, queueStatus, type RetryReport, retryFailed } from './queue-admin.ts';

const USAGE = `usage: queue-cli.ts status [--json]
       queue-cli.ts retry-failed [--id <jobId>] [--json]
Reads REDIS_URL, REDIS_CLUSTER_NODES and BULLMQ_PREFIX.`;

/**
 * Operator commands on the email queue (package scripts `queue:status`, `queue:retry-failed`).
 * Exit code 0 when done, 1 when Redis fails (one line on stderr), 2 on a usage error; `--help`
 * prints the usage.
 */
export async function runQueueCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const { command, json, id } = args;

  let redis: RedisClient | undefined;
  let queue: Queue<SendOtpJobData> | undefined;
  try {
    const config = loadQueueConfig(env);
    let cause: Error | undefined;
    redis = createRedis({ url: config.redisUrl, clusterNodes: config.clusterNodes }, 'operator', (error) => {
      cause = error;
    });
    await redis.connect().catch((error: Error) => {
      const at = config.clusterNodes || where(config.redisUrl);
      throw new Error(`cannot reach Redis at ${at}: ${(cause ?? error).message}`);
    });
    // The queue's meta is the services' to write: a mistyped prefix leaves nothing behind.
    queue = new Queue<SendOtpJobData>(EMAIL_QUEUE, {
      connection: redis,
      prefix: config.prefix,
      skipMetasUpdate: true,
    });
    queue.on('error', () => {}); // every failure also rejects the command that met it, reported below
    const now = new Date();
    if (command === 'status') {
      const status = await queueStatus(queue, now);
      console.log(json ? JSON.stringify(status, null, 2) : formatStatus(status, config.prefix));
    } else {
      const report = await retryFailed(queue, now, id);
      console.log(json ? JSON.stringify(report, null, 2) : formatRetry(report));
    }
    return 0;
  } catch (error) {
    const { message } = error as Error;
    console.error(`queue ${command}: ${message.split('\n')[0]}`);
    return 1;
  } finally {
    await queue?.close().catch(() => {});
    if (redis?.status !== 'end') redis?.disconnect();
  }
}

function parse(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false }, id: { type: 'string' } },
  });
  const [command, ...extra] = positionals;
  if ((command !== 'status' && command !== 'retry-failed') || extra.length > 0)
    throw new Error(`unknown command: ${positionals.join(' ') || '(none)'}`);
  if (command === 'status' && values.id !== undefined) throw new Error('--id is for retry-failed');
  return { command, json: values.json, id: values.id };
}

/** `host:port` of a Redis URL, never its password. */
function where(url: string): string {
  try {
    const { hostname, port } = new URL(url);
    return `${hostname}:${port || 6379}`;
  } catch {
    return 'REDIS_URL';
  }
}

function formatStatus({ counts, oldestWaitingSeconds, lastFailures }: QueueStatus, prefix: string): string {
  const lines = [`queue ${EMAIL_QUEUE} (prefix ${prefix})`];
  for (const [state, count] of Object.entries(counts)) lines.push(`  ${state.padEnd(10)} ${count}`);
  lines.push(
    `oldest waiting job: ${oldestWaitingSeconds === null ? 'none waiting' : `${oldestWaitingSeconds} s`}`,
  );
  lines.push(lastFailures.length === 0 ? 'no failures' : `last ${lastFailures.length} failures:`);
  for (const failure of lastFailures) {
    const reason = failure.failedReason.replaceAll(/\s+/g, ' ');
    lines.push(
      `  ${failure.id}  attempts ${failure.attemptsMade}  ${failure.finishedAt ?? '-'}  ${failure.to}  ${reason}`,
    );
  }
  return lines.join('\n');
}

function formatRetry({ retried, skippedExpired, skippedRedacted }: RetryReport): string {
  return [
    `retried: ${retried}`,
    `skipped, code expired: ${skippedExpired}`,
    `skipped, redacted: ${skippedRedacted}`,
  ].join('\n');
}

if (import.meta.main) process.exitCode = await runQueueCli(process.argv.slice(2));
