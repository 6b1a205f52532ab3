// Words, quoted names ("refresh_tokens", "public"."users"), parentheses; string literals (also
// E'…' with backslash escapes, and $tag$…$tag$) and line comments are matched only to be skipped, so
// nothing in them is taken for a keyword or a name.
const TOKENS =
  /--[^\n]*|[Ee]'(?:[^'\\]|\\[\s\S]|'')*'|'(?:[^']|'')*'|\$([\p{L}_][\p{L}\p{N}_]*)?\$[\s\S]*?\$\1\$|(?:"(?:[^"]|"")*"|[\p{L}_][\p{L}\p{N}_$]*)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[\p{L}_][\p{L}\p{N}_$]*))*|[()]/gu;

/**
 * The statement without its block comments, nested ones included (Postgres nests them, which a
 * regular expression cannot follow). A `/*` inside a string cuts the rest: a name is lost, never a
 * value taken for one.
 */
function withoutBlockComments(sql: string): string {
  if (!sql.includes('/*')) return sql;
  let kept = '';
  let depth = 0;
  for (let i = 0; i < sql.length; i++) {
    if (sql.startsWith('/*', i)) {
      depth++;
      i++;
    } else if (depth > 0 && sql.startsWith('*/', i)) {
      depth--;
      i++;
    } else if (depth === 0) kept += sql[i];
  }
  return kept;
}

/** The keyword after which each statement names its target. */
const TARGET_AFTER: Record<string, string> = {
  SELECT: 'FROM',
  DELETE: 'FROM',
  INSERT: 'INTO',
  MERGE: 'INTO',
};

interface Token {
  text: string;
  depth: number;
}

function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let depth = 0;
  for (const [text] of withoutBlockComments(sql).matchAll(TOKENS)) {
    if (text === '(') depth++;
    else if (text === ')') depth--;
    else if (!/^(--|[Ee]?'|\$)/.test(text)) tokens.push({ text, depth });
  }
  return tokens;
}

/** `"public"."users"` → `users`: the table, as written, without schema or quotes. */
const tableName = (name: string) =>
  (name.split(/\s*\.\s*/).at(-1) ?? '').replace(/^"|"$/g, '').replaceAll('""', '"');
const isKeyword = (token: Token | undefined, word: string) => token?.text.toUpperCase() === word;

/** The table the statement starting at `start` works on, read at its own depth; undefined when none. */
function targetOf(tokens: Token[], start: number): string | undefined {
  const first = tokens[start];
  if (first === undefined) return undefined;
  const operation = first.text.toUpperCase();
  if (operation === 'UPDATE') {
    const next = tokens[start + 1];
    const table = isKeyword(next, 'ONLY') ? tokens[start + 2] : next;
    return table?.depth === first.depth ? tableName(table.text) : undefined;
  }
  const after = TARGET_AFTER[operation];
  for (let i = start + 1; after !== undefined && i < tokens.length - 1; i++) {
    const token = tokens[i] as Token;
    if (token.depth < first.depth) return undefined;
    const next = tokens[i + 1] as Token;
    if (token.depth === first.depth && isKeyword(token, after) && next.depth === first.depth)
      return isKeyword(next, 'ONLY') ? tableName(tokens[i + 2]?.text ?? '') : tableName(next.text);
  }
  return undefined;
}

export interface QuerySummary {
  /** `SELECT`, `INSERT`, `WITH`…: the statement's first keyword. */
  operation: string;
  /** `SELECT sessions`, `WITH users`, `BEGIN`: for a span's name, never a value from the query. */
  summary: string;
}

/**
 * A low-cardinality summary of a statement, as OpenTelemetry names database spans: `{operation}
 * {table}`, from its text (parameters stay `$1`…, literals are skipped). The table is the one the
 * statement selects from, inserts into, updates or deletes from (of a join, the first); a `WITH`
 * statement is named by the table of its first part (`WITH users` for `with u as (insert into users
 * …) select … from u`). The operation alone when no table is found.
 */
export function summarizeQuery(sql: unknown): QuerySummary | undefined {
  if (typeof sql !== 'string') return undefined;
  const tokens = tokenize(sql);
  const first = tokens[0];
  if (first === undefined || first.text.startsWith('"')) return undefined;
  const operation = first.text.toUpperCase();
  let target: string | undefined;
  if (operation === 'WITH') {
    // `with [recursive] name [(columns)] as [[not] materialized] (statement …`
    const as = tokens.findIndex((token) => token.depth === 0 && isKeyword(token, 'AS'));
    const body = tokens.findIndex((token, index) => index > as && token.depth === 1);
    if (as !== -1 && body !== -1) target = targetOf(tokens, body);
  } else {
    target = targetOf(tokens, 0);
  }
  return { operation, summary: target ? `${operation} ${target}` : operation };
}
