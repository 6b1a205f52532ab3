import { describe, expect, it } from 'vitest';
import { postgresFailure } from './migrate.ts';

describe('postgresFailure', () => {
  it('says where Postgres was looked for when it could not be reached, without the password', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5999'), { code: 'ECONNREFUSED' });
    expect(postgresFailure(refused, 'postgres://me:hunter2@127.0.0.1:5999/tessera')).toBe(
      'connect ECONNREFUSED 127.0.0.1:5999 (is Postgres running at 127.0.0.1:5999, and may this user sign in? DATABASE_URL is postgres://me:***@127.0.0.1:5999/tessera)',
    );
  });

  it('hides a password given as a parameter too', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const text = postgresFailure(refused, 'postgres://me@127.0.0.1:1/tessera?password=hunter2&sslpassword=x');
    expect(text).not.toContain('hunter2');
    expect(text).toContain('password=***');
  });

  it("reads node-postgres's form with no host after the credentials, a socket's folder in the query", () => {
    const refused = Object.assign(new Error('connect ENOENT /run/postgresql/.s.PGSQL.5433'), {
      code: 'ENOENT',
    });
    const denied = Object.assign(new Error('password authentication failed for user "me"'), {
      code: '28P01',
    });
    expect(postgresFailure(denied, 'postgres://me:hunter2@/tessera?host=/run/postgresql&port=5433')).toBe(
      'password authentication failed for user "me" (is Postgres running at /run/postgresql:5433, and may this user sign in? DATABASE_URL is postgres://me:***@/tessera?host=/run/postgresql&port=5433)',
    );
    expect(postgresFailure(refused, 'postgres://me:hunter2@/tessera?host=/run/postgresql')).toBe(
      'connect ENOENT /run/postgresql/.s.PGSQL.5433 (is Postgres running at /run/postgresql, and may this user sign in? DATABASE_URL is postgres://me:***@/tessera?host=/run/postgresql)',
    );
  });

  it('gives any other failure as it is', () => {
    const failed = Object.assign(new Error('relation "users" already exists'), { code: '42P07' });
    expect(postgresFailure(failed, 'postgres://me:hunter2@db/tessera')).toBe(
      'relation "users" already exists',
    );
  });
});
