import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { mountSmallDisk, type SmallDisk } from '@tessera/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createTransport } from '../src/transport.ts';

// Development's outbox on a full disk (a 64 KB tmpfs, filled; its mount takes root, as CI runs the
// tests): the send fails, and is retried as any failed send, with no empty email left behind.

let outbox: SmallDisk | undefined;
beforeAll(async () => {
  outbox = await mountSmallDisk('64k');
  await writeFile(path.join(outbox.path, 'filler'), Buffer.alloc(64 * 1024)).catch(() => {});
});
afterAll(() => outbox?.remove());

it('fails the send on a full outbox and leaves no part of the email there', async () => {
  const dir = outbox?.path ?? '';
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
