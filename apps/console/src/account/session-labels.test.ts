import type { Session } from '@tessera/client';
import { describe, expect, it } from 'vitest';
import { sessionLabels } from './session-labels.ts';

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0';
const session = (id: string, userAgent: string, createdAt: string): Session =>
  ({
    _id: id,
    userAgent,
    createdAt,
    lastUsedAt: createdAt,
    ipAddress: '203.0.113.7',
    current: false,
  }) as Session;

describe('sessionLabels', () => {
  it('names each session by its device and when it was signed in, and counts those alike in both', () => {
    const labels = sessionLabels([
      session('a', FIREFOX, '2026-11-27T16:56:05.000Z'),
      session('b', FIREFOX, '2026-11-27T16:56:40.000Z'),
      session('c', FIREFOX, '2026-11-26T09:00:00.000Z'),
    ]);
    const names = ['a', 'b', 'c'].map((id) => labels.get(id));
    expect(new Set(names).size).toBe(3);
    expect(names[0]).toMatch(/^Firefox on Linux, signed in .+, 1 of 2$/);
    expect(names[1]).toMatch(/^Firefox on Linux, signed in .+, 2 of 2$/);
    expect(names[2]).toMatch(/^Firefox on Linux, signed in [^,]+, \d{4}, [^,]+$/);
  });
});
