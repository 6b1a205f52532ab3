import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const lifecycle = new URL('../src/lifecycle.ts', import.meta.url).href;
// A start-up in miniature: much allocated, a little kept; the heap V8 holds before and after.
const script = `
  import v8 from 'node:v8';
  import { releaseStartupMemory } from '${lifecycle}';
  const kept = [];
  for (let i = 0; i < 400_000; i++) {
    const item = { id: i, name: 'module ' + i, parts: [i, i + 1, i + 2] };
    if (i % 100 === 0) kept.push(item);
  }
  const held = () => {
    const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_size]));
    return { total: v8.getHeapStatistics().total_heap_size, young: spaces.new_space };
  };
  const before = held();
  releaseStartupMemory();
  console.log(JSON.stringify({ before, after: held(), kept: kept.length }));
`;

it('releaseStartupMemory hands back the heap a start-up grew and no longer uses', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--max-semi-space-size=8', '--input-type=module', '--eval', script],
    { cwd: new URL('..', import.meta.url) },
  );
  const { before, after, kept } = JSON.parse(stdout);
  expect(kept).toBe(4000);
  const MB = 1024 * 1024;
  // The young generation grew to its maximum (two 8 MB halves) and goes back to its first size.
  expect(before.young).toBeGreaterThanOrEqual(8 * MB);
  expect(after.young).toBeLessThanOrEqual(2 * MB);
  expect(before.total - after.total).toBeGreaterThanOrEqual(8 * MB);
});
