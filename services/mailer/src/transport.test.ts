import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { loadConfig } from './config.ts';
import { createTransport } from './transport.ts';

const outboxes: string[] = [];
afterEach(async () => {
  for (const dir of outboxes.splice(0)) await rm(dir, { recursive: true, force: true });
});

it('writes development mail to the outbox, also for an address that holds a slash', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-outbox-'));
  outboxes.push(dir);
  const transport = createTransport(loadConfig({ APP_ENV: 'development', MAIL_OUTBOX_DIR: dir }));
  try {
    await transport.send({
      to: 'a/b@example.com',
      subject: '1234 is your sign-in code',
      text: 'Hello',
      html: '<p>Hello</p>',
    });
  } finally {
    transport.close();
  }

  const [file, ...others] = await readdir(dir);
  expect(others).toEqual([]);
  expect(file).toMatch(/-a_b@example\.com\.eml$/);
  expect(await readFile(path.join(dir, file ?? ''), 'utf8')).toContain('To: a/b@example.com');
});

it('writes development mail to the outbox for the longest address too', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-outbox-'));
  outboxes.push(dir);
  const transport = createTransport(loadConfig({ APP_ENV: 'development', MAIL_OUTBOX_DIR: dir }));
  const to = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(57)}.com`;
  try {
    await transport.send({ to, subject: '1234 is your sign-in code', text: 'Hello', html: '<p>Hello</p>' });
  } finally {
    transport.close();
  }

  const [file] = await readdir(dir);
  expect(file).toMatch(/d{57}\.com\.eml$/);
  expect(await readFile(path.join(dir, file ?? ''), 'utf8')).toContain(to);
});

it('keeps every email to one address in the outbox, however many arrive at once', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-outbox-'));
  outboxes.push(dir);
  const transport = createTransport(loadConfig({ APP_ENV: 'development', MAIL_OUTBOX_DIR: dir }));
  const codes = Array.from({ length: 20 }, (_, index) => String(1000 + index));
  try {
    await Promise.all(
      codes.map((code) =>
        transport.send({
          to: 'ada@example.com',
          subject: `${code} is your sign-in code`,
          text: code,
          html: code,
        }),
      ),
    );
  } finally {
    transport.close();
  }

  const files = await readdir(dir);
  const subjects = await Promise.all(
    files.map(async (file) => /^Subject: (\d{4})/m.exec(await readFile(path.join(dir, file), 'utf8'))?.[1]),
  );
  expect(subjects.sort()).toEqual(codes);
});
