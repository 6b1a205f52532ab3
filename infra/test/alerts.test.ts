import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

// The alerting rules as Prometheus reads them, by its own promtool (Debian's `prometheus`, which
// .ci/run installs): they load, and each alert fires on the series it is for and stays quiet on
// healthy ones (alerts.test.yaml). test/e2e.test.ts checks that every metric they name is served.
const RULES = fileURLToPath(new URL('../prometheus/', import.meta.url));

async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)('promtool', args, { cwd: RULES });
    return stdout;
  } catch (error) {
    const {
      code,
      stdout = '',
      stderr = '',
    } = error as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (code === 'ENOENT') throw new Error("promtool not found: install Debian's prometheus package");
    throw new Error(`promtool ${args.join(' ')} failed:\n${stdout}${stderr}`);
  }
}

it('loads every alerting rule', async () => {
  expect(await promtool('check', 'rules', 'alerts.yaml')).toMatch(/SUCCESS: 12 rules found/);
});

it('fires each tested alert on its series, and not on healthy ones', async () => {
  expect(await promtool('test', 'rules', 'alerts.test.yaml')).toMatch(/SUCCESS/);
});
