import { DependencyUnavailableError } from '@tessera/contracts';
import { type Command, Redis, type RedisOptions, ReplyError } from 'ioredis';

// Server replies that mean "not now" rather than "wrong", by their error code (the reply's first word).
const TRANSIENT_REPLIES = new Set([
  'LOADING',
  'BUSY',
  'MASTERDOWN',
  'CLUSTERDOWN',
  'TRYAGAIN',
  'READONLY',
  'OOM',
]);

function classify(error: Error): Error {
  if (error instanceof ReplyError) {
    const code = error.message.split(' ', 1)[0] ?? '';
    return TRANSIENT_REPLIES.has(code) ? new DependencyUnavailableError('redis', { cause: error }) : error;
  }
  // Anything ioredis rejects a command with that the server did not send is about the connection.
  return new DependencyUnavailableError('redis', { cause: error });
}

/** A client whose commands reject with DependencyUnavailableError on an outage. */
class ClassifyingRedis extends Redis {
  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    const reject = command.reject;
    command.reject = (error) => reject(classify(error));
    return super.sendCommand(command, stream);
  }
}

export type RedisRole = 'commands' | 'producer' | 'worker';

const ROLES: Record<RedisRole, RedisOptions> = {
  // Requests must not hang on Redis: a command fails at once while it is away.
  commands: { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 3000 },
  // A queue producer fails fast instead of queueing commands (BullMQ's production guide).
  producer: { lazyConnect: true, enableOfflineQueue: false, connectTimeout: 3000 },
  // Workers block on Redis and must retry forever (BullMQ's production guide).
  worker: { maxRetriesPerRequest: null },
};

/**
 * A Redis client for one role, reporting connection errors to `onError`. `commands` and `producer`
 * clients connect when told to (`await client.connect()`), so a start-up failure is the caller's to see.
 */
export function createRedis(
  url: string,
  role: RedisRole,
  onError: (error: Error) => void,
  options: RedisOptions = {},
): Redis {
  const client = new ClassifyingRedis(url, { ...ROLES[role], ...options, replyMapping: 'legacy' });
  client.on('error', onError);
  return client;
}

/** Quits a connected client (pending replies arrive first), drops one that is not. */
export async function closeRedis(client: Redis): Promise<void> {
  if (client.status === 'ready') await client.quit();
  else client.disconnect();
}

// What a Redis that holds the queue must be set to, so a restart or a full memory loses no job.
const DURABLE = { appendonly: 'yes', appendfsync: 'everysec', 'maxmemory-policy': 'noeviction' } as const;

/**
 * The settings of this Redis that would lose queued jobs (each as `name=value, want …`); empty when
 * it is durable, or when CONFIG is disabled (a managed Redis) and nothing can be told.
 */
export async function durabilityProblems(client: Redis): Promise<string[]> {
  const problems: string[] = [];
  for (const [name, wanted] of Object.entries(DURABLE)) {
    const reply = (await client.config('GET', name).catch(() => [])) as string[];
    const value = reply[1];
    if (value === undefined) return [];
    // `always` is more durable than `everysec`, not a problem.
    if (value !== wanted && !(name === 'appendfsync' && value === 'always'))
      problems.push(`${name}=${value}, want ${wanted}`);
  }
  return problems;
}
