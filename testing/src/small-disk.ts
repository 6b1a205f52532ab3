import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface SmallDisk {
  /** Where it is mounted. */
  path: string;
  /** Unmounts it and removes its mount point. */
  remove(): Promise<void>;
}

/**
 * A filesystem of `size` (`2m`, `64k`) of the test's own, a tmpfs, for tests of a full disk; `owner`
 * (a user name) owns its root. Mounting takes root, as CI runs the tests.
 */
export async function mountSmallDisk(size: string, owner?: string): Promise<SmallDisk> {
  const where = await mkdtemp(path.join(tmpdir(), 'tessera-small-disk-'));
  const options = owner ? `size=${size},uid=${owner},gid=${owner}` : `size=${size}`;
  try {
    await run('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', where]);
  } catch (error) {
    await rm(where, { recursive: true, force: true });
    throw new Error(`mounting a tmpfs as a small disk takes root, as CI runs: ${(error as Error).message}`);
  }
  return {
    path: where,
    async remove() {
      await run('umount', [where]).catch(() => {});
      await rm(where, { recursive: true, force: true });
    },
  };
}
