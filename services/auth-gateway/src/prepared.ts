import {
  type Compilable,
  type CompiledQuery,
  type Kysely,
  NoResultError,
  type QueryNode,
  type QueryResult,
} from 'kysely';

/** Stands, while a prepared query is built, for the value of the argument `name`. */
class Marker {
  readonly name: string;
  constructor(name: string) {
    this.name = name;
  }
}

/** A query compiled once per Kysely instance: its SQL, and where each call's arguments go in it. */
interface Plan {
  compiled: CompiledQuery;
  /** The compiled parameters, with `undefined` where an argument goes. */
  constants: readonly unknown[];
  /** Parameter position → argument name. */
  slots: readonly (readonly [number, string])[];
}

export interface PreparedQuery<DB, A, O> {
  /** Runs the query with `args`; the rows come through the instance's plugins, as with `execute()`. */
  execute(db: Kysely<DB>, args: A): Promise<QueryResult<O>>;
  /** The rows, as the builder's `execute()` answers them. */
  rows(db: Kysely<DB>, args: A): Promise<O[]>;
  /** The first row, as the builder's `executeTakeFirst()` answers it. */
  first(db: Kysely<DB>, args: A): Promise<O | undefined>;
  /** The first row, or the builder's `executeTakeFirstOrThrow()` error. */
  firstOrThrow(db: Kysely<DB>, args: A): Promise<O>;
}

/**
 * A Kysely query built and compiled once per Kysely instance, then run with each call's arguments,
 * so a hot path spends nothing on building, plugins' query transforms and compiling.
 *
 * `build` gets markers for the arguments, typed as the values, and uses them where a call's values
 * go (`eb.val($.now)`, `.where('id', '=', $.id)`, `.set({ endedAt: $.at })`, `.limit($.limit)`).
 * Its SQL must not depend on the values: read each argument by name (`$.x`, never a spread), never
 * look at one (a marker is no Date), and leave per call the queries whose SQL varies with their
 * input (an `in` list, columns set only when given, `is null` for a null). Preparing fails when an
 * argument read is not a parameter of its own in the compiled SQL (Kysely inlined, expanded or
 * dropped it); a call fails when an argument is `undefined` (Kysely would omit the column: pass
 * `null`). Other values (Dates, Buffers, strings) go to the driver as they are, as with `execute()`.
 */
export function prepareQuery<DB, A extends object, O>(
  build: (db: Kysely<DB>, $: A) => Compilable<O>,
): PreparedQuery<DB, A, O> {
  // Per instance: the SQL depends on the dialect and the plugins (tests build several apps).
  const plans = new WeakMap<Kysely<DB>, Plan>();

  function plan(db: Kysely<DB>): Plan {
    let found = plans.get(db);
    if (found === undefined) {
      found = compile(db);
      plans.set(db, found);
    }
    return found;
  }

  function compile(db: Kysely<DB>): Plan {
    const read = new Map<string, Marker>();
    const markers = new Proxy({} as A, {
      get(_, name) {
        if (typeof name !== 'string') return undefined;
        const marker = read.get(name) ?? new Marker(name);
        read.set(name, marker);
        return marker;
      },
    });
    const compiled = build(db, markers).compile();
    const slots: [number, string][] = [];
    const constants = compiled.parameters.map((value, index) => {
      if (value instanceof Marker) {
        slots.push([index, value.name]);
        return undefined;
      }
      if (containsMarker(value))
        throw new Error(
          `prepared query: a marker inside a parameter's value (Kysely expanded it): ${compiled.sql}`,
        );
      return value;
    });
    for (const name of read.keys())
      if (!slots.some(([, slot]) => slot === name))
        throw new Error(
          `prepared query: argument "${name}" is no parameter of the compiled SQL (inlined or dropped by Kysely): ${compiled.sql}`,
        );
    return { compiled, constants, slots };
  }

  async function execute(db: Kysely<DB>, args: A): Promise<QueryResult<O>> {
    const { compiled, constants, slots } = plan(db);
    const parameters = constants.slice();
    for (const [index, name] of slots) {
      const value = (args as Record<string, unknown>)[name];
      if (value === undefined) throw new Error(`prepared query: no value for argument "${name}"`);
      parameters[index] = value;
    }
    // The compiled query with this call's parameters: executeQuery runs it and the plugins'
    // transformResult (CamelCasePlugin's column names), skipping only building and compiling.
    const { sql, query, queryId } = compiled;
    return db.executeQuery<O>({ sql, query, queryId, parameters });
  }

  return {
    execute,
    rows: async (db, args) => (await execute(db, args)).rows,
    first: async (db, args) => (await execute(db, args)).rows[0],
    async firstOrThrow(db, args) {
      const { rows } = await execute(db, args);
      if (rows.length === 0) throw new NoResultError(plan(db).compiled.query as QueryNode);
      return rows[0] as O;
    },
  };
}

function containsMarker(value: unknown): boolean {
  if (value instanceof Marker) return true;
  if (Array.isArray(value)) return value.some(containsMarker);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype)
    return Object.values(value).some(containsMarker);
  return false;
}
