import { DependencyUnavailableError } from '@tessera/contracts';
import { Cluster, type Command, Redis, type RedisOptions, ReplyError } from 'ioredis';

// Server replies that mean "not now" rather than "wrong", by their error code (the reply's first word):
// among them a full memory (OOM), a snapshot or append-only file it cannot write, a full disk most
// often (MISCONF), and too few replicas for its `min-replicas-to-write` (NOREPLICAS).
const TRANSIENT_REPLIES = new Set([
  'LOADING',
  'BUSY',
  'MASTERDOWN',
  'CLUSTERDOWN',
  'TRYAGAIN',
  'READONLY',
  'OOM',
  'MISCONF',
  'NOREPLICAS',
]);

function classify(error: Error): Error {
  if (error instanceof ReplyError) {
    const code = error.message.split(' ', 1)[0] ?? '';
    return TRANSIENT_REPLIES.has(code) ? new DependencyUnavailableError('redis', { cause: error }) : error;
  }
  // Anything ioredis rejects a command with that the server did not send is about the connection.
  return new DependencyUnavailableError('redis', { cause: error });
}

// A command can pass through sendCommand more than once (offline queue, cluster redirects).
const classified = new WeakSet<Command>();

// ioredis's rejection of a command that got no answer within its `commandTimeout`.
const TIMED_OUT = 'Command timed out';

/** What a connection replaced for its silence emits as its error (ClassifyingRedis). */
class SilentConnectionError extends Error {
  override name = 'SilentConnectionError';
}

function classifyRejection(command: Command, unanswered?: () => void): void {
  if (classified.has(command)) return;
  classified.add(command);
  const reject = command.reject;
  command.reject = (error) => {
    reject(classify(error));
    if (error.message === TIMED_OUT) unanswered?.();
  };
}

/**
 * Whether an error is the connection's rather than the server's answer: a socket's (reset, refused,
 * timed out: Node's errors name their system call), ioredis's on a closed connection, that of a
 * connection replaced for its silence (here, or by ioredis's `socketTimeout`), or a command's
 * rejected for want of a connection. A full Redis's OOM (a reply, if one that `classify` calls
 * unavailable) is not: the connection stays up and reports nothing.
 */
export function isConnectionError(error: Error): boolean {
  if (error instanceof DependencyUnavailableError) return !(error.cause instanceof ReplyError);
  return (
    'syscall' in error ||
    error.message === 'Connection is closed.' ||
    error instanceof SilentConnectionError ||
    isSocketTimeout(error)
  );
}

/** ioredis's error when it drops a connection silent for its `socketTimeout`. */
export function isSocketTimeout(error: Error): boolean {
  return error.message.startsWith('Socket timeout. ');
}

/**
 * A client whose commands reject with DependencyUnavailableError on an outage, and that replaces a
 * connection on which commands went unanswered for two of its `commandTimeout`s, the second ending
 * a timeout or more after the first, with nothing from the server in between. Such a connection may
 * be dead without a word (a NAT or firewall that forgot it drops what is sent, and the kernel retries
 * for about 15 minutes before it says so) while a new one would work at once. One timeout alone may
 * be a slow command (a long script, a fork), answered a moment later with what waited behind it. The
 * commands still waiting on a replaced connection fail (503s) instead of being sent again over the
 * new one after their callers were told they failed.
 */
class ClassifyingRedis extends Redis {
  /** When the server last sent anything on this connection, and when the first command since timed out. */
  #heardAt = Number.NEGATIVE_INFINITY;
  #timedOutAt = Number.NEGATIVE_INFINITY;
  #replacing = false;

  constructor(url: string, options: RedisOptions & { replyMapping: 'legacy' }) {
    super(url, options);
    // Each connection (the first, and every one made again) is listened to from its start.
    this.on('connect', () => {
      this.#replacing = false;
      this.stream.on('data', () => {
        this.#heardAt = performance.now();
      });
    });
  }

  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    classifyRejection(command, this.#unanswered);
    return super.sendCommand(command, stream);
  }

  #unanswered = () => {
    // The flush below rejects what waits, each with a timeout: none of them replaces it again.
    if (this.status !== 'ready' || this.#replacing) return;
    const now = performance.now();
    if (this.#timedOutAt < this.#heardAt) {
      this.#timedOutAt = now;
      return;
    }
    const timeout = this.options.commandTimeout ?? 0;
    if (now - this.#timedOutAt < timeout) return;
    this.#replacing = true;
    // ioredis's own, which its types call private (the version is pinned, its patch too).
    (this as unknown as { flushQueue(error: Error): void }).flushQueue(new Error(TIMED_OUT));
    const silent = Math.round((now - Math.max(this.#heardAt, this.#timedOutAt - timeout)) / 1000);
    this.emit('error', new SilentConnectionError(`no answer to commands for ${silent} s: connecting again`));
    this.disconnect(true);
  };
}

/** The same for a Redis Cluster; its own redirects (MOVED, ASK) still see the server's replies first. */
class ClassifyingCluster extends Cluster {
  override sendCommand(
    command: Command,
    stream?: Parameters<Cluster['sendCommand']>[1],
    node?: unknown,
  ): unknown {
    classifyRejection(command);
    return super.sendCommand(command, stream, node);
  }
}

/** A client of one Redis server or of a Redis Cluster: the same commands, routed by key on a cluster. */
/**
 * A Lua function for scripts that time what they write by the Redis server's clock, which every
 * process sharing the server reads alike: `now_ms()`, milliseconds since the epoch.
 */
export const REDIS_NOW_LUA = `
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
`;

export type RedisClient = Redis | Cluster;

/**
 * Where Redis is: the server at `url`, or, when `clusterNodes` (comma-separated `host:port` seeds)
 * is not empty, a Redis Cluster whose nodes take the credentials and TLS (`rediss:`) of `url`.
 */
export interface RedisTarget {
  url: string;
  clusterNodes: string;
}

export type RedisRole = 'commands' | 'producer' | 'worker' | 'operator';

// Auto-pipelining (the gateway's commands and queue producer): the commands that concurrent requests
// issue in one turn of the event loop go out in one write and come back in one read, rather than a
// round trip each (about half of Redis's CPU per request under load). A batch made by a client with
// BullMQ's ~50 scripts is cheap only with the ioredis patch (patches/ioredis@6.0.0.patch).
// A command without an answer after this long fails, as an outage: a server that hangs with its
// connection open (stopped, overloaded, a partition that drops packets) must not hang requests.
const COMMAND_TIMEOUT_MS = 2000;

const ROLES: Record<RedisRole, RedisOptions> = {
  // Requests must not hang on Redis: a command fails at once while it is away.
  commands: {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 3000,
    commandTimeout: COMMAND_TIMEOUT_MS,
    enableAutoPipelining: true,
  },
  // A queue producer fails fast instead of queueing commands (BullMQ's production guide).
  producer: {
    lazyConnect: true,
    enableOfflineQueue: false,
    connectTimeout: 3000,
    commandTimeout: COMMAND_TIMEOUT_MS,
    enableAutoPipelining: true,
  },
  // Workers block on Redis and must retry forever (BullMQ's production guide).
  worker: { maxRetriesPerRequest: null },
  // An operator's command: one try, no reconnecting; an answer, not a hang.
  operator: { lazyConnect: true, connectTimeout: 5000, maxRetriesPerRequest: 1, retryStrategy: () => null },
};

/** The options of a role said the Cluster's way: what concerns the whole client at the top, the rest per node. */
function clusterOptions(url: string, options: RedisOptions) {
  const { lazyConnect, enableOfflineQueue, enableAutoPipelining, keyPrefix, retryStrategy, ...node } =
    options;
  const { username, password, protocol } = new URL(url);
  return {
    lazyConnect,
    enableOfflineQueue,
    enableAutoPipelining,
    keyPrefix,
    ...(retryStrategy !== undefined && { clusterRetryStrategy: retryStrategy }),
    redisOptions: {
      ...(username && { username: decodeURIComponent(username) }),
      ...(password && { password: decodeURIComponent(password) }),
      ...(protocol === 'rediss:' && { tls: {} }),
      ...node,
      replyMapping: 'legacy' as const,
    },
  };
}

const seeds = (clusterNodes: string) =>
  clusterNodes.split(',').map((seed) => {
    const colon = seed.lastIndexOf(':');
    return { host: seed.slice(0, colon), port: Number(seed.slice(colon + 1)) };
  });

/**
 * A Redis client for one role, reporting connection errors to `onError`. `commands`, `producer` and
 * `operator` clients connect when told to (`await client.connect()`), so a start-up failure is the
 * caller's to see.
 */
export function createRedis(
  { url, clusterNodes }: RedisTarget,
  role: RedisRole,
  onError: (error: Error) => void,
  options: RedisOptions = {},
): RedisClient {
  const roleOptions = { ...ROLES[role], ...options };
  const client = clusterNodes
    ? new ClassifyingCluster(seeds(clusterNodes), clusterOptions(url, roleOptions))
    : new ClassifyingRedis(url, { ...roleOptions, replyMapping: 'legacy' });
  client.on('error', onError);
  return client;
}

/** Where a connection's outages are told: pino's methods. */
export interface OutageLog {
  warn(fields: object, message: string): void;
  info(message: string): void;
  debug(fields: object, message: string): void;
}

/**
 * Tells `log` of an outage of `client` once: a warning with its first error, the reconnection
 * attempts that fail after it at debug (one every two seconds or so, for as long as it lasts), and
 * one line when the connection is ready again.
 */
export function reportOutages(client: RedisClient, log: OutageLog, name: string): void {
  let down = false;
  client.on('error', (err: Error) => {
    // An error while the connection stays up (a cluster's slots refresh) is told each time.
    if (down && client.status !== 'ready') return log.debug({ err }, `${name} still unreachable`);
    down = true;
    log.warn({ err }, `${name} connection error`);
  });
  client.on('ready', () => {
    if (down) log.info(`${name} connection is back`);
    down = false;
  });
}

/**
 * Quits a connected client (pending replies arrive first), drops one that is not, or whose server
 * went away before it noticed (the quit cannot be written then: an outage, not a failure to close).
 */
export async function closeRedis(client: RedisClient): Promise<void> {
  if (client.status !== 'ready') return client.disconnect();
  await client.quit().catch((error: unknown) => {
    if (!(error instanceof DependencyUnavailableError)) throw error;
    client.disconnect();
  });
}

/** Redis is not what its settings say: no retry mends it. */
export class RedisSettingsError extends Error {
  override name = 'RedisSettingsError';
}

/**
 * Refuses a client of one server given a node of a Redis Cluster: there it meets MOVED for the keys
 * of the other nodes' slots, and CROSSSLOT where one command spans slots, so most requests would
 * fail; a cluster, even of one shard, is named in REDIS_CLUSTER_NODES. A server that will not say
 * (INFO refused, no answer in time) is taken for what its settings say.
 */
export async function refuseClusterNode(client: RedisClient): Promise<void> {
  if (client instanceof Cluster) return;
  const info = await client.info('cluster').catch(() => '');
  if (/^cluster_enabled:1/m.test(info))
    throw new RedisSettingsError(
      'REDIS_URL is a node of a Redis Cluster, which a client of one server cannot use (MOVED, CROSSSLOT): name its nodes in REDIS_CLUSTER_NODES',
    );
}

// What a Redis that holds the queue must be set to, so a restart or a full memory loses no job (and
// `maxmemory`, which must be set, at some limit).
const DURABLE = { appendonly: 'yes', appendfsync: 'everysec', 'maxmemory-policy': 'noeviction' } as const;

async function serverProblems(server: Redis): Promise<string[]> {
  const problems: string[] = [];
  for (const [name, wanted] of Object.entries(DURABLE)) {
    const reply = (await server.config('GET', name).catch(() => [])) as string[];
    const value = reply[1];
    if (value === undefined) return [];
    // `always` is more durable than `everysec`, not a problem.
    if (value !== wanted && !(name === 'appendfsync' && value === 'always'))
      problems.push(`${name}=${value}, want ${wanted}`);
  }
  // Without a limit, noeviction never refuses a write: Redis grows until the machine or the
  // container kills it, and every client waits for it to come back.
  const [, maxmemory] = (await server.config('GET', 'maxmemory').catch(() => [])) as string[];
  if (maxmemory === '0') problems.push('maxmemory=0, want a limit below the memory Redis may use');
  return problems;
}

/**
 * The settings of this Redis that would lose queued jobs (each as `name=value, want …`, prefixed
 * with `host:port` on a cluster, where every master is asked); empty when it is durable, or when
 * CONFIG is disabled (a managed Redis) and nothing can be told.
 */
export async function durabilityProblems(client: RedisClient): Promise<string[]> {
  if (!(client instanceof Cluster)) return serverProblems(client);
  const perMaster = await Promise.all(
    client.nodes('master').map(async (master) => {
      const where = `${master.options.host}:${master.options.port}`;
      return (await serverProblems(master)).map((problem) => `${where} ${problem}`);
    }),
  );
  return perMaster.flat();
}

/** At start: a warning naming each setting of this Redis that would lose queued emails. */
export async function warnIfNotDurable(
  client: RedisClient,
  log: { warn(fields: object, message: string): void },
): Promise<void> {
  const problems = await durabilityProblems(client);
  if (problems.length > 0)
    log.warn({ problems }, 'Redis may lose queued emails on a restart or when full; see README, Operations');
}

/**
 * How far `now` is from the Redis server's clock, in ms (positive when ahead), taken halfway through
 * the round trip of one `TIME`.
 */
async function clockOffset(client: RedisClient, now: () => number): Promise<number> {
  const before = now();
  const [seconds, micros] = await client.time();
  return (before + now()) / 2 - (Number(seconds) * 1000 + Number(micros) / 1000);
}

/**
 * At start: a warning when this process's clock is a second or more from the Redis server's. Tessera's
 * processes compare times each other wrote (a refresh token's rotation with its grace window, a code's
 * expiry with the mailer's), so their hosts' clocks must agree; Redis's is the one every process reaches.
 */
export async function warnIfClockDiffers(
  client: RedisClient,
  log: { warn(fields: object, message: string): void },
  now: () => number,
): Promise<void> {
  // A Redis that refuses TIME (an ACL) tells nothing; the limits' scripts would fail on it anyway.
  const offset = await clockOffset(client, now).catch(() => 0);
  if (Math.abs(offset) < 1000) return;
  const seconds = Math.round(Math.abs(offset) / 100) / 10;
  log.warn(
    { clockOffsetMs: Math.round(offset) },
    `This host's clock is ${seconds} s ${offset > 0 ? 'ahead of' : 'behind'} the Redis server's: keep every host's clock in sync (NTP); see README, Operations`,
  );
}
