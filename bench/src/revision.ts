import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Cleanup } from './cleanup.ts';

const run = promisify(execFile);

const git = async (cwd: string, ...args: string[]) => (await run('git', args, { cwd })).stdout.trim();

/** Short hash and subject of the checkout at `root`, marked when it has uncommitted changes. */
export async function describeRevision(root: string): Promise<string> {
  const head = await git(root, 'log', '-1', '--format=%h %s');
  const dirty = (await git(root, 'status', '--porcelain', '--untracked-files=no')) !== '';
  return dirty ? `${head} + uncommitted changes` : head;
}

/**
 * Checks `revision` out into a temporary git worktree of `repository` and installs its
 * dependencies; the worktree is removed by `cleanup`. Returns the worktree's path.
 */
export async function checkOut(
  repository: string,
  revision: string,
  cleanup: Cleanup,
  progress: (line: string) => void,
): Promise<string> {
  const commit = await git(repository, 'rev-parse', '--verify', `${revision}^{commit}`);
  const parent = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-'));
  const root = path.join(parent, 'tree');
  progress(`checking out ${revision} (${commit.slice(0, 10)}) into ${root}`);
  await git(repository, 'worktree', 'add', '--detach', root, commit);
  cleanup.add(`remove the worktree ${root}`, async () => {
    await git(repository, 'worktree', 'remove', '--force', root);
    await rm(parent, { recursive: true, force: true });
  });
  progress(`installing its dependencies (pnpm install --frozen-lockfile)`);
  await run('pnpm', ['install', '--frozen-lockfile', '--prefer-offline'], {
    cwd: root,
    maxBuffer: 64 * 1024 * 1024,
  });
  return root;
}
