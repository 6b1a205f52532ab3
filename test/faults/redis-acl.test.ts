import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import {
  createTestDatabase,
  type PrivateRedis,
  type SmtpSink,
  startPrivateRedis,
  startSmtpSink,
  type TestDatabase,
  waitUntil,
} from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTessera, type Tessera } from './tessera.ts';

// Redis with users of its own (README, Operations: Least privilege): the ACL the README gives serves
// both services; a user without a command BullMQ needs stops the mailer, saying why, rather than
// spinning on the refusal until its memory runs out.

let redis: PrivateRedis;
let sink: SmtpSink;
let database: TestDatabase;
let tessera: Tessera | undefined;
beforeAll(async () => {
  [redis, sink, database] = await Promise.all([startPrivateRedis(), startSmtpSink(), createTestDatabase()]);
  // The README's line, as an operator copies it.
  const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
  const rules = /^ *user tessera on >PASSWORD (.+)$/m.exec(readme)?.[1]?.split(' ') ?? [];
  expect(rules).toContain('+info');
  const acl = (...words: string[]) =>
    promisify(execFile)('redis-cli', ['-u', redis.url, 'ACL', 'SETUSER', ...words]);
  await acl('tessera', 'on', '>secret-tessera', ...rules);
  await acl('noinfo', 'on', '>secret-noinfo', ...rules, '-info');
});
afterAll(async () => {
  await tessera?.stop();
  await Promise.all([redis?.remove(), sink?.close(), database?.drop()]);
});

const as = (user: string) => {
  const url = new URL(redis.url);
  [url.username, url.password] = [user, `secret-${user}`];
  return url.toString();
};

it('signs in, with the code emailed, as the Redis user the README gives', async () => {
  tessera = await startTessera({ databaseUrl: database.url, redisUrl: as('tessera'), sink });
  tessera.startMailer();
  const code = await tessera.codeByEmail('acl@example.com');
  const signedIn = await tessera.call('POST', '/api/v1/auth/verify-otp-email', {
    email: 'acl@example.com',
    code,
  });
  expect(signedIn.status).toBe(200);
});

it('stops the mailer with one line when its Redis user lacks a command it needs', async () => {
  const refused = tessera?.startMailer({ REDIS_URL: as('noinfo') });
  if (!refused) throw new Error('no Tessera');
  const [code] = (await once(refused.child, 'exit')) as [number | null];
  await waitUntil('its last line read', () => refused.output().includes('stopping'));
  expect(code).toBe(1);
  expect(refused.output()).toContain(
    'Redis refuses the mailer a command or key it needs (its ACL): stopping (README, Operations: Least privilege)',
  );
});
