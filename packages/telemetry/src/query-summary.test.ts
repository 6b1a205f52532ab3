import { describe, expect, it } from 'vitest';
import { summarizeQuery } from './query-summary.ts';

const summary = (sql: string) => summarizeQuery(sql)?.summary;

describe('summarizeQuery', () => {
  it('names a statement by its operation and table, as Kysely writes them', () => {
    expect(summary('select "id", "email" from "users" where "email" = $1')).toBe('SELECT users');
    expect(summary('insert into "security_events" ("type", "user_id") values ($1, $2)')).toBe(
      'INSERT security_events',
    );
    expect(summary('update "refresh_tokens" set "rotated_at" = $1 where "token_hash" = $2')).toBe(
      'UPDATE refresh_tokens',
    );
    expect(summary('delete from "sessions" where "id" in (select "id" from "old" limit $1)')).toBe(
      'DELETE sessions',
    );
    expect(summary('DELETE FROM ONLY public.sessions WHERE id = $1')).toBe('DELETE sessions');
    expect(summary('update only "public"."users" set "name" = $1')).toBe('UPDATE users');
  });

  it('gives the same name whatever columns, joins, subqueries and values a statement has', () => {
    const names = [
      'update "users" set "first_name" = $1 where "id" = $2',
      'update "users" set "first_name" = $1, "last_name" = $2, "updated_at" = $3 where "id" = $4 returning *',
      "update users set bio = 'from users; -- not a comment' /* from x */ where id = 7",
    ].map(summary);
    expect(new Set(names)).toEqual(new Set(['UPDATE users']));
    expect(
      summary(
        'select "t"."session_id", (select count(*) from "sessions" where "user_id" = "u"."id") as "n" ' +
          'from "refresh_tokens" as "t" inner join "users" as "u" on "u"."id" = "t"."user_id"',
      ),
    ).toBe('SELECT refresh_tokens');
  });

  it('names a WITH statement by the table of its first part', () => {
    expect(
      summary(
        'with "u" as (insert into "users" ("email") values ($1) on conflict ("email") do update set "last_login" = $2 returning *), ' +
          '"s" as (insert into "sessions" ("id", "user_id") select $3, "u"."id" from "u" returning "id") select * from "u"',
      ),
    ).toBe('WITH users');
    expect(
      summary(
        'with recursive "t"("session_id") as materialized (update "refresh_tokens" set "rotated_at" = $1 returning "session_id") select * from "t"',
      ),
    ).toBe('WITH refresh_tokens');
  });

  it('takes no value in a dollar-quoted or escaped string, or a nested comment, for a table', () => {
    expect(summary('select $$ from alice_secret $$')).toBe('SELECT');
    expect(summary('select $tag$ from alice_secret $tag$ from "users"')).toBe('SELECT users');
    expect(summary("select E'it\\'s from leaked_value' from users")).toBe('SELECT users');
    expect(summary('select /* a /* b */ from secret */ 1')).toBe('SELECT');
    expect(summarizeQuery(undefined)).toBeUndefined();
  });

  it('falls back to the operation alone, and to nothing for what is no statement', () => {
    expect(summarizeQuery('select 1')).toEqual({ operation: 'SELECT', summary: 'SELECT' });
    expect(summary('BEGIN')).toBe('BEGIN');
    expect(summary('with x as (values (1)) select * from x')).toBe('WITH');
    expect(summary('  ')).toBeUndefined();
  });
});
