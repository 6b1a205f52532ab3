import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSweep } from './sweep.ts';

const lines: Record<string, unknown>[] = [];
const log = pino({ base: null }, { write: (line: string) => lines.push(JSON.parse(line)) });

beforeEach(() => {
  vi.useFakeTimers();
  lines.length = 0;
});
afterEach(() => {
  vi.useRealTimers();
});

/** A batch whose every call waits until the test settles it. */
function controlledFinalize() {
  const calls: Array<{ limit: number; settle: (ids: string[] | Error) => void }> = [];
  const runBatch = (limit: number) =>
    new Promise<number>((resolve, reject) => {
      calls.push({ limit, settle: (ids) => (ids instanceof Error ? reject(ids) : resolve(ids.length)) });
    });
  return { calls, runBatch };
}

const ids = (count: number) => Array.from({ length: count }, (_, i) => `user-${i}`);

describe('a sweep', () => {
  it('runs at once when started, then every interval', async () => {
    const runBatch = vi.fn(async () => 0);
    const sweep = createSweep({ name: 'test', batches: () => runBatch, interval: 60, log });
    sweep.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(runBatch).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(59_999);
    expect(runBatch).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(runBatch).toHaveBeenCalledTimes(2);
    await sweep.stop();
    await vi.advanceTimersByTimeAsync(600_000);
    expect(runBatch).toHaveBeenCalledTimes(2);
  });

  it('skips its runs, quietly, while not ready (a schema behind), and works once it is', async () => {
    const runBatch = vi.fn(async () => 0);
    let ready = false;
    const sweep = createSweep({
      name: 'test',
      batches: () => runBatch,
      interval: 60,
      log,
      ready: async () => ready,
    });
    sweep.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(runBatch).not.toHaveBeenCalled();
    ready = true;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(runBatch).toHaveBeenCalledTimes(1);
    expect(lines).toEqual([]);
    await sweep.stop();
  });

  it('takes batch after batch while batches come back full', async () => {
    const batches = [ids(3), ids(3), ids(1)];
    const runBatch = vi.fn(async () => (batches.shift() ?? []).length);
    const sweep = createSweep({ name: 'test', batches: () => runBatch, interval: 60, log, batchSize: 3 });
    sweep.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(runBatch.mock.calls).toEqual([[3], [3], [3]]);
    await sweep.stop();
  });

  it('logs a failed run and tries again at the next one, without throwing', async () => {
    const runBatch = vi
      .fn<(limit: number) => Promise<number>>()
      .mockRejectedValueOnce(new Error('connect ECONNREFUSED 127.0.0.1:5432'))
      .mockResolvedValue(0);
    const sweep = createSweep({ name: 'test', batches: () => runBatch, interval: 5, log });
    sweep.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 50,
        msg: 'sweep failed; the next run tries again',
        err: expect.objectContaining({ message: 'connect ECONNREFUSED 127.0.0.1:5432' }),
      }),
    ]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(runBatch).toHaveBeenCalledTimes(2);
    await sweep.stop();
  });

  it('stops after the batch in progress, and stop() resolves only once that batch is done', async () => {
    const { calls, runBatch } = controlledFinalize();
    const sweep = createSweep({ name: 'test', batches: () => runBatch, interval: 60, log, batchSize: 2 });
    sweep.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1);

    let stopped = false;
    const stopping = sweep.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    // A full batch: more may be due, but the sweep is stopping.
    calls[0]?.settle(ids(2));
    await stopping;
    expect(stopped).toBe(true);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toHaveLength(1);
  });

  it('ends each run, however it ends: short batch, failure, or stopped with more to do', async () => {
    const { calls, runBatch } = controlledFinalize();
    const end = vi.fn();
    const sweep = createSweep({
      name: 'test',
      batches: () => Object.assign((limit: number) => runBatch(limit), { end }),
      interval: 60,
      log,
      batchSize: 2,
    });
    sweep.start();
    await vi.advanceTimersByTimeAsync(0);
    calls[0]?.settle(ids(1));
    await vi.advanceTimersByTimeAsync(0);
    expect(end).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(60_000);
    calls[1]?.settle(new Error('Postgres went away'));
    await vi.advanceTimersByTimeAsync(0);
    expect(end).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(60_000);
    const stopping = sweep.stop();
    calls[2]?.settle(ids(2));
    await stopping;
    expect(end).toHaveBeenCalledTimes(3);
  });

  it('resolves stop() at once when no run is in progress, and can be started again', async () => {
    const runBatch = vi.fn(async () => 0);
    const sweep = createSweep({ name: 'test', batches: () => runBatch, interval: 60, log });
    await sweep.stop();
    sweep.start();
    sweep.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(runBatch).toHaveBeenCalledTimes(1);
    await sweep.stop();
  });
});
