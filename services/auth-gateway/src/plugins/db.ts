import { createHash } from 'node:crypto';
import { DependencyBusyError, DependencyUnavailableError } from '@tessera/contracts';
import { meter } from '@tessera/telemetry';
import type { FastifyBaseLogger } from 'fastify';
import fp from 'fastify-plugin';
import { CamelCasePlugin, Kysely, PostgresDialect, type PostgresPool, sql } from 'kysely';
import pg from 'pg';
import { LAST_TIME } from '../calendar.ts';
import type { Database, PostgresState } from '../database.ts';
import { type SchemaState, schemaState, warnIfSchemaBehind } from '../migration-state.ts';

declare module 'fastify' {
  interface FastifyInstance {
    db: Kysely<Database>;
    /** Whether Postgres has every migration of this code. */
    schemaState: SchemaState;
    /** Whether Postgres answers, on a connection of its own (a busy pool is no outage), and takes writes. */
    postgresAnswers: () => Promise<PostgresState>;
  }
}

// SQLSTATE classes and codes that say "not now": connection exceptions, a statement cancelled (its
// timeout, a lock's timeout, or an operator), the server shutting down or ending an idle connection
// as it was taken (idle_session_timeout), a server short of a resource (53000: open files and the
// like; a full disk; too many connections), a disk's I/O error, a write to a read-only server (a
// standby, before its promotion or after a failover left the gateway on it), a deadlock or a
// serialization failure, which the same request retried gets past. Everything else the server
// answers is about the query, out of memory (53200, which one query can cause on every run) and a
// configured limit (53400) among them.
const UNAVAILABLE_STATES = /^(08|53[013]00$|55P03$|57014$|57P0[1235]$|58030$|25006$|40001$|40P01$)/;
// A table or column that is not there (undefined_table, undefined_column): also "not now" while the
// schema is not yet known to have every migration of this code (a gateway started before them).
const SCHEMA_STATES = /^(42P01|42703)$/;

/** What the pool rejects with: an outage as DependencyUnavailableError, a query's own error as it is. */
function classify(error: unknown, schemaKnownCurrent: () => boolean): unknown {
  if (error instanceof pg.DatabaseError) {
    const code = error.code ?? '';
    const notNow = UNAVAILABLE_STATES.test(code) || (SCHEMA_STATES.test(code) && !schemaKnownCurrent());
    if (!notNow) return error;
  }
  return new DependencyUnavailableError('postgres', { cause: error });
}

// Statements are prepared once per connection (named pg queries): Postgres then skips parsing and,
// after a few runs, planning, which is most of its CPU on the hot paths. The names a connection
// keeps are bounded, since some statements vary with their input (the columns a profile update sets).
const PREPARED_PER_CONNECTION = 200;
const statementNames = new Map<string, string>();
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = createHash('sha1').update(text).digest('base64url');
    if (statementNames.size < 10 * PREPARED_PER_CONNECTION) statementNames.set(text, name);
  }
  return name;
}

/**
 * A prepared statement whose result columns a migration changed: the connection must go. Known by the
 * function that raised it, whose name no `lc_messages` translates, or else by the English message.
 */
const isStalePlan = (error: unknown) =>
  error instanceof pg.DatabaseError &&
  error.code === '0A000' &&
  (error.routine === 'RevalidateCachedQuery' || /cached plan/.test(error.message));

// A statement still unanswered this long after Postgres's own statement_timeout would have cancelled
// it is looked at: when Postgres answers nothing on the readiness probe's connection either (frozen,
// or cut off with its connections open), or answers there that this connection's backend runs no
// statement (the connection lost on the way, without a word to either side), its connection is
// closed and its request answers 503, instead of waiting for an answer that may never come. While
// Postgres answers and runs it, it waits on (a commit held by a synchronous standby, the deletion
// sweep's 10-minute statements, PgBouncer's queue in session pooling), and is looked at again as
// long after.
const STATEMENT_MARGIN_MS = 1000;
// pg's errors when a statement, or a connection being made, got no answer in time.
const NO_ANSWER = /^(Query read timeout|timeout expired)$/;

type Connection = Awaited<ReturnType<PostgresPool['connect']>>;

interface Statements {
  schemaKnownCurrent: () => boolean;
  /** How long a statement may go unanswered before `silent` is asked, ms. */
  deadline: number;
  /** Whether Postgres answers nothing on another connection either. */
  silent: () => Promise<boolean>;
  /** Whether the connection of that backend is lost (its backend idle, then ended, or gone). */
  lost: (pid: number) => Promise<boolean>;
}

/**
 * A pooled client that names its statements, closes itself when one goes unanswered past its
 * deadline while Postgres is silent, and classifies its failures; one per client, kept (so Kysely
 * keeps its own connection object for it too). `released` is told each time it goes back.
 */
function preparingConnection(
  client: pg.PoolClient,
  { schemaKnownCurrent, deadline, silent, lost }: Statements,
  released: () => void,
): Connection {
  // Its backend, as Postgres named it when it connected (through PgBouncer, a number no backend has).
  const pid = (client as pg.PoolClient & { processID: number | null }).processID;
  const names = new Set<string>();
  // Replaced on release, when a failure says it must go.
  let replace = false;
  // Why it was closed: what the caller sends next on it (a transaction's rollback) fails with it.
  let cut: Error | undefined;
  return {
    query: ((text: string, values: unknown[]) => {
      if (cut) return Promise.reject(new DependencyUnavailableError('postgres', { cause: cut }));
      const name = statementName(text);
      const named = names.has(name) || names.size < PREPARED_PER_CONNECTION;
      if (named) names.add(name);
      let answered = false;
      const sent = performance.now();
      const look = async () => {
        const unanswering = await silent();
        // Postgres answers, yet its backend of this connection runs nothing, or is gone: the
        // statement never reached it, or its answer never came back (a NAT or firewall that forgot
        // the connection, a failover behind one address).
        const gone = !unanswering && pid !== null && (await lost(pid).catch(() => false));
        if (answered) return;
        if (!unanswering && !gone) {
          timer = setTimeout(look, deadline);
          return;
        }
        const waited = Math.round((performance.now() - sent) / 1000);
        cut = new Error(
          unanswering
            ? `Postgres answered neither this statement in ${waited} s nor the probe`
            : `Postgres runs no statement on this connection's backend, unanswered for ${waited} s: the connection is lost`,
        );
        // pg closes a client with a statement under way at once; the statement fails with it.
        void client.end().catch(() => {});
      };
      let timer = setTimeout(look, deadline);
      return client
        .query(named ? { name, text, values } : { text, values })
        .catch((error: unknown) => {
          if (!cut && !isStalePlan(error)) throw classify(error, schemaKnownCurrent);
          // The connection goes; the caller's retry (a 503) meets another, without its old plans.
          replace = true;
          throw new DependencyUnavailableError('postgres', { cause: cut ?? error });
        })
        .finally(() => {
          answered = true;
          clearTimeout(timer);
        });
    }) as never,
    release: (destroy?: boolean) => {
      released();
      client.release(destroy || replace);
    },
  };
}

// pg-pool's error when a request waited connectionTimeoutMillis for a connection of a full pool.
const POOL_WAIT_TIMEOUT = /^timeout exceeded when trying to connect$/;

/**
 * A pg pool whose failures to connect, and lost connections, reject with DependencyUnavailableError:
 * DependencyBusyError when every connection stayed in use, held by requests, for the whole wait and
 * `busy` says Postgres answers (more requests than the pool serves). Every statement is a named
 * (prepared) one, up to PREPARED_PER_CONNECTION of them per connection, with a deadline.
 */
function classifyingPool(pool: pg.Pool, statements: Statements, busy: () => boolean): PostgresPool {
  const connections = new WeakMap<pg.PoolClient, Connection>();
  let inUse = 0;
  return {
    async connect() {
      const client = await pool.connect().catch((error: unknown) => {
        const full = inUse >= (pool.options.max ?? 10) && POOL_WAIT_TIMEOUT.test((error as Error).message);
        if (full && busy()) throw new DependencyBusyError('postgres', { cause: error });
        throw new DependencyUnavailableError('postgres', { cause: error });
      });
      inUse++;
      let connection = connections.get(client);
      if (connection === undefined) {
        connection = preparingConnection(client, statements, () => inUse--);
        connections.set(client, connection);
        // The pool listens for the errors of idle clients only: a connection lost while a statement
        // runs would otherwise be an uncaught error that stops the process. The statement rejects
        // with it (a 503), and the pool drops the client on release.
        client.on('error', () => {});
      }
      return connection;
    },
    end: () => pool.end(),
    options: pool.options,
  };
}

const TABLES = ['users', 'sessions', 'refresh_tokens', 'security_events'];

type Timeouts = { statement_timeout: number; idle_in_transaction_session_timeout: number };

// How long the pool keeps an idle connection (pg's default).
const POOL_IDLE_MS = 10_000;

// PgBouncer refuses a connection's settings it does not know, unless told to ignore them, which then
// leaves them unapplied.
const POOLER_REFUSAL = /unsupported startup parameter/;

/**
 * Reaches Postgres, and warns when it runs the gateway's statements without the timeouts the pool
 * asked for (a pooler that ignores them): a statement stuck behind a lock would then hold its
 * connection for good. A pooler that refuses them stops the start, saying what to set, and so do
 * settings of the role or database that the gateway cannot work with (checkSessionSettings).
 */
async function checkSettings(db: Kysely<Database>, wanted: Timeouts, log: FastifyBaseLogger): Promise<void> {
  const { rows } = await sql<{ name: string; setting: string; role: string }>`
    select name, setting, current_user as role from pg_settings
     where name in ('statement_timeout', 'idle_in_transaction_session_timeout', 'DateStyle',
       'default_transaction_isolation', 'idle_session_timeout') order by name`
    .execute(db)
    .catch((error: unknown) => {
      const reason = (error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : '';
      if (!POOLER_REFUSAL.test(reason)) throw error;
      throw new Error(
        `Postgres refused the connection's settings (${reason}): behind PgBouncer, list them in its ignore_startup_parameters and set them on the gateway's role (README, Operations: PgBouncer)`,
      );
    });
  const unapplied = rows
    .filter((row): row is typeof row & { name: keyof Timeouts } => row.name in wanted)
    .filter((row) => Number(row.setting) !== wanted[row.name]);
  if (unapplied.length > 0)
    log.warn(
      {
        settings: Object.fromEntries(
          unapplied.map((row) => [row.name, { wanted: wanted[row.name], ms: Number(row.setting) }]),
        ),
        fix: unapplied
          .map((row) => `alter role "${row.role}" set ${row.name} = ${wanted[row.name]};`)
          .join(' '),
      },
      'Postgres does not apply the timeouts the gateway asked for (a pooler ignores them?): set them on its role',
    );
  checkSessionSettings(new Map(rows.map((row) => [row.name, row.setting])), rows[0]?.role ?? '', log);
}

/**
 * Settings a DBA or a managed Postgres may give the role or the database, which the gateway cannot
 * work with: dates written in another style than ISO (pg reads them as null: every sign-in answered
 * 500 after writing its rows) and a stricter default isolation (its statements count on read
 * committed: concurrent sign-ins, refreshes and profile updates answered 500) stop the start, saying
 * what to set; idle connections ended sooner than the pool lets them go are warned of (each one taken
 * as it ends answers 503).
 */
function checkSessionSettings(settings: Map<string, string>, role: string, log: FastifyBaseLogger): void {
  const dateStyle = settings.get('DateStyle') ?? 'ISO';
  if (!/^ISO\b/i.test(dateStyle))
    throw new Error(
      `Postgres writes dates as '${dateStyle}' (DateStyle), which the gateway cannot read: alter role "${role}" set datestyle = 'ISO, MDY'; (behind PgBouncer, then RECONNECT or restart it: it keeps the style it first met)`,
    );
  // Postgres runs read uncommitted as read committed.
  const isolation = settings.get('default_transaction_isolation') ?? 'read committed';
  if (isolation !== 'read committed' && isolation !== 'read uncommitted')
    throw new Error(
      `Postgres runs transactions as '${isolation}' (default_transaction_isolation); the gateway's need read committed: alter role "${role}" set default_transaction_isolation = 'read committed';`,
    );
  const idle = Number(settings.get('idle_session_timeout') ?? 0);
  if (idle > 0 && idle <= POOL_IDLE_MS)
    log.warn(
      {
        idleSessionTimeoutMs: idle,
        poolIdleMs: POOL_IDLE_MS,
        fix: `alter role "${role}" set idle_session_timeout = 0;`,
      },
      'Postgres ends idle connections before the pool lets them go (idle_session_timeout): a request that takes one as it ends answers 503',
    );
}

/**
 * Warns when Postgres would not vacuum Tessera's tables (found as its statements find them, on the
 * search path): every refresh and sweep leaves dead rows, which then pile up (the tables grow by
 * megabytes a minute under load, their indexes too). A warning only: a failure to tell is logged.
 */
async function warnIfNotVacuumed(db: Kysely<Database>, log: FastifyBaseLogger): Promise<void> {
  try {
    const { rows } = await sql<{ on: boolean; disabled: string[] }>`
      select current_setting('autovacuum')::bool and current_setting('track_counts')::bool as on,
        array(select t.name from unnest(${TABLES}::text[]) t(name)
          join pg_class c on c.oid = to_regclass(t.name)
          where exists (select from pg_options_to_table(c.reloptions) o
            where o.option_name = 'autovacuum_enabled' and not o.option_value::bool)
          order by t.name) as disabled`.execute(db);
    const { on = true, disabled = [] } = rows[0] ?? {};
    if (!on)
      log.warn(
        {},
        'Postgres autovacuum is off: dead rows pile up in every table; turn it on (autovacuum and track_counts)',
      );
    if (disabled.length > 0)
      log.warn(
        { tables: disabled },
        'Postgres autovacuum is disabled for some tables: their dead rows pile up',
      );
  } catch (err) {
    log.debug({ reason: (err as Error).message }, 'could not tell whether Postgres vacuums the tables');
  }
}

const poolConnections = meter.createObservableGauge('tessera.db.pool.connections', {
  description:
    "The Postgres pool's connections in use and idle, and the requests waiting for one (waited_for)",
});

/**
 * One warning when waits for a connection first run out with every connection in use, then every
 * 10 s one with how many did meanwhile, while they go on (each request's is a 503 SERVER_BUSY,
 * counted in tessera_errors_total): a line each would add to the load that causes them.
 */
function busyWarning(log: FastifyBaseLogger, poolSize: number): () => void {
  let meanwhile = 0;
  let timer: NodeJS.Timeout | undefined;
  const warn = (refused: number) =>
    log.warn(
      { refused, poolSize },
      'postgres pool exhausted: waits for a connection ran out after 3 s with every connection in use',
    );
  const flush = () => {
    timer = undefined;
    if (meanwhile === 0) return;
    warn(meanwhile);
    meanwhile = 0;
    timer = setTimeout(flush, 10_000).unref();
  };
  return () => {
    if (timer) {
      meanwhile++;
      return;
    }
    warn(1);
    timer = setTimeout(flush, 10_000).unref();
  };
}

const PROBE = `select pg_is_in_recovery() or current_setting('transaction_read_only')::boolean as "readOnly"`;
// The backend, ended when it is idle (between statements, maybe in a transaction whose locks it
// holds until idle_in_transaction_session_timeout): its client will never send it anything again.
const END_IF_IDLE = `select state, case when state like 'idle%' then pg_terminate_backend(pid) end as ended
  from pg_stat_activity where pid = $1`;
// The highest process id Linux gives (PID_MAX_LIMIT): PgBouncer tells its clients random numbers,
// mostly above it, for the backends it shares out.
const PID_MAX = 4_194_304;

/**
 * Whether Postgres answers, and takes writes, asked on a connection of the probe's own (made at the first
 * question, at start, and again after a failure), one question at a time. Readiness asks it, not
 * the pool: a loaded gateway has no connection free, and taking it out of service would move its
 * load onto the others. The pool asks it too when every connection stayed in use, since a Postgres
 * that hangs holds them as well as a busy one does, and when a statement went unanswered past its
 * deadline (`silent`, then `lost`).
 */
function ownConnectionProbe(options: pg.ClientConfig) {
  let connected: Promise<pg.Client> | undefined;
  let asking: Promise<PostgresState> | undefined;
  let askedAt = Number.NEGATIVE_INFINITY;
  let failuresInARow = 0;
  let closed = false;
  function connect(): Promise<pg.Client> {
    const client = new pg.Client(options);
    const ready = client.connect().then(() => client);
    client.on('error', () => drop(ready));
    return ready;
  }
  /** Ends a connection (the current one unless told), within a second: a hung server never answers. */
  function drop(which = connected): Promise<unknown> {
    if (which === connected) connected = undefined;
    const ended = which?.then((client) => client.end()).catch(() => {});
    return Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
  }
  async function ask(): Promise<PostgresState> {
    askedAt = performance.now();
    let current: Promise<pg.Client> | undefined;
    try {
      if (closed) throw new Error('closed');
      connected ??= connect();
      current = connected;
      const { rows } = await (await current).query<PostgresState>(PROBE);
      failuresInARow = 0;
      return { readOnly: rows[0]?.readOnly === true };
    } catch (error) {
      failuresInARow++;
      if (current) void drop(current);
      throw new DependencyUnavailableError('postgres', { cause: error });
    } finally {
      asking = undefined;
    }
  }
  /** Asks, or waits for the answer to the question already asked. */
  function check(): Promise<PostgresState> {
    asking ??= ask();
    return asking;
  }
  return {
    check,
    /**
     * Whether Postgres answers nothing: the question, or the connection for it, timed out. Not when
     * it answers with an error (too many connections, the probe's backend terminated), nor once the
     * probe is closed: then nothing tells that Postgres is not working on what it was asked.
     */
    silent: () =>
      check().then(
        () => false,
        (error: DependencyUnavailableError) => NO_ANSWER.test((error.cause as Error)?.message ?? ''),
      ),
    /**
     * Whether the connection of backend `pid` is lost, asked on the probe's connection: its backend
     * is idle, between statements, while a statement of it waits for an answer (then it is ended, so
     * that it lets go of its transaction's locks), or there is no such backend (ended, or a failover
     * moved the address to another server). Not a number PgBouncer made up, which no backend has.
     * Anything else (`active`, waiting for a lock or a synchronous standby, a fast-path call,
     * `disabled` where track_activities is off) may be running it.
     */
    async lost(pid: number): Promise<boolean> {
      connected ??= connect();
      const client = await connected;
      const { rows } = await client.query<{ state: string | null }>(END_IF_IDLE, [pid]);
      if (rows[0] === undefined) return pid > 0 && pid <= PID_MAX;
      return rows[0].state?.startsWith('idle') === true;
    },
    /**
     * Whether Postgres answered lately: no after two questions in a row went unanswered (one may be
     * the gateway's own event loop stalled past the timeout). Asks again if the last is a second old.
     */
    answered(): boolean {
      if (performance.now() - askedAt >= 1000) check().catch(() => {});
      return failuresInARow < 2;
    },
    close() {
      closed = true;
      return drop();
    },
  };
}

/**
 * node-postgres's parsers, except that a `timestamptz` of `infinity` or `-infinity` (written by hand)
 * reads as the last or first time a Date holds instead of as a number: every time stays a Date.
 */
function getTypeParser(oid: number, format?: 'text' | 'binary') {
  return oid === pg.types.builtins.TIMESTAMPTZ && format !== 'binary'
    ? parseTimestamptz
    : pg.types.getTypeParser(oid, format);
}

const parseTime = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text');
function parseTimestamptz(text: string): Date {
  const value: Date | number = parseTime(text);
  return typeof value === 'number' ? new Date(Math.sign(value) * LAST_TIME) : value;
}

/**
 * Postgres through Kysely; checked at start so a wrong DATABASE_URL fails loudly (and a schema that
 * lacks a migration, or tables Postgres would not vacuum, warn: the gateway runs), closed on shutdown.
 */
export default fp<{ url: string; poolSize: number; statementTimeout: number }>(
  async function dbPlugin(app, { url, poolSize, statementTimeout }) {
    const timeouts: Timeouts = {
      // A statement stuck behind a lock (an operator's ALTER TABLE, a long transaction) fails with a
      // 503 instead of keeping its connection: otherwise such waits fill the pool, and every request
      // then fails, including those that need none of the locked rows.
      statement_timeout: statementTimeout * 1000,
      // A transaction left open with nothing running (a bug, a process frozen mid-way) ends, and its
      // row locks with it, instead of holding up every request that needs those rows.
      idle_in_transaction_session_timeout: 60_000,
    };
    const pool = new pg.Pool({
      connectionString: url,
      max: poolSize,
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: POOL_IDLE_MS,
      types: { getTypeParser },
      ...timeouts,
    });
    // One short line: the error carries its whole pg client.
    pool.on('error', (err) =>
      app.log.warn(
        { reason: err.message, code: (err as { code?: unknown }).code },
        'idle Postgres client lost',
      ),
    );
    const probe = ownConnectionProbe({
      connectionString: url,
      connectionTimeoutMillis: 3000,
      query_timeout: 3000,
      ...timeouts,
    });
    const warnBusy = busyWarning(app.log, poolSize);
    // Busy while Postgres answers; an outage like any other when it does not (its probe's answer).
    const busy = () => {
      if (!probe.answered()) return false;
      warnBusy();
      return true;
    };
    const db: Kysely<Database> = new Kysely<Database>({
      dialect: new PostgresDialect({
        pool: classifyingPool(
          pool,
          {
            schemaKnownCurrent: () => schema.knownCurrent(),
            deadline: statementTimeout * 1000 + STATEMENT_MARGIN_MS,
            silent: probe.silent,
            lost: probe.lost,
          },
          busy,
        ),
      }),
      plugins: [new CamelCasePlugin()],
    });
    const schema = schemaState(db);
    app.decorate('db', db);
    app.decorate('schemaState', schema);
    app.decorate('postgresAnswers', probe.check);
    const observe: Parameters<typeof poolConnections.addCallback>[0] = (result) => {
      result.observe(pool.totalCount - pool.idleCount, { state: 'used' });
      result.observe(pool.idleCount, { state: 'idle' });
      result.observe(pool.waitingCount, { state: 'waited_for' });
    };
    poolConnections.addCallback(observe);
    // The pool, not Kysely: a request still running meets a closed pool, an outage like any other.
    app.addHook('onClose', async () => {
      poolConnections.removeCallback(observe);
      await probe.close();
      if (!pool.ended) await pool.end();
    });
    await checkSettings(db, timeouts, app.log);
    await warnIfSchemaBehind(db, app.log);
    await warnIfNotVacuumed(db, app.log);
    // Its connection made now, so that no probe waits for it (its timeout may be a second).
    await probe.check().catch(() => {});
  },
  { name: 'db' },
);
