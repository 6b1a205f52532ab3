import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createTransport } from '../src/transport.ts';

// Development's outbox on a full disk (a 64 KB tmpfs, filled; its mount takes root, as CI runs the
// tests): the send fails, and is retried as any failed send, with no empty email left behind.

const run = promisify(execFile);
let outbox: string | undefined;
beforeAll(async () => {
  outbox = await mkdtemp(path.join(tmpdir(), 'tessera-full-outbox-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', outbox]).catch((error: Error) => {
    throw new Error(`mounting a tmpfs as a full outbox takes root, as CI runs: ${error.message}`);
  });
  await writeFile(path.join(outbox, 'filler'), Buffer.alloc(64 * 1024)).catch(() => {});
});
afterAll(async () => {
  if (!outbox) return;
  await run('umount', [outbox]).catch(() => {});
  await rm(outbox, { recursive: true, force: true });
});

it('fails the send on a full outbox and leaves no part of the email there', async () => {
  const dir = outbox ?? '';
  const transport = createTransport(loadConfig({ APP_ENV: 'development', MAIL_OUTBOX_DIR: dir }));
  try {
    const email = {
      to: 'ana@example.com',
      subject: '1234 is your sign-in code',
      text: 'Hello',
      html: '<p>Hello</p>',
    };
    await expect(transport.send(email)).rejects.toMatchObject({ code: 'ENOSPC' });
    await expect(transport.send(email)).rejects.toMatchObject({ code: 'ENOSPC' });
  } finally {
    transport.close();
  }
  expect(await readdir(dir)).toEqual(['filler']);
});
