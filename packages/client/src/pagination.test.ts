import { describe, expect, it } from 'vitest';
import { hasNextPage, walkPages } from './pagination.ts';

const meta = (currentPage: number, totalPages: number, hasNext?: boolean) => ({
  currentPage,
  totalPages,
  ...(hasNext !== undefined && { hasNextPage: hasNext }),
});

describe('hasNextPage (spec rule 3)', () => {
  it('follows hasNextPage when the server sends it, whatever the page counts say', () => {
    expect(hasNextPage(meta(1, 1, true))).toBe(true);
    expect(hasNextPage(meta(1, 3, false))).toBe(false);
  });

  it('compares currentPage with totalPages when hasNextPage is absent', () => {
    expect(hasNextPage(meta(1, 3))).toBe(true);
    expect(hasNextPage(meta(3, 3))).toBe(false);
    expect(hasNextPage(meta(1, 0))).toBe(false);
  });
});

/** A paginated route over `pages`, recording which pages were asked for. */
function route(pages: Array<{ ids: string[]; hasNext?: boolean }>) {
  const asked: number[] = [];
  const fetchPage = async (page: number) => {
    asked.push(page);
    const { ids = [], hasNext } = pages[page - 1] ?? {};
    return { list: ids.map((_id) => ({ _id })), pagination: meta(page, pages.length, hasNext) };
  };
  return { asked, fetchPage };
}

async function collect(walk: AsyncIterable<{ _id: string }>) {
  const ids: string[] = [];
  for await (const item of walk) ids.push(item._id);
  return ids;
}

describe('walkPages', () => {
  it('walks every page in order, using the page counts when hasNextPage is absent', async () => {
    const { asked, fetchPage } = route([{ ids: ['a', 'b'] }, { ids: ['c', 'd'] }, { ids: ['e'] }]);
    expect(await collect(walkPages(fetchPage))).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(asked).toEqual([1, 2, 3]);
  });

  it('stops where hasNextPage says false even though more pages are counted', async () => {
    const { asked, fetchPage } = route([{ ids: ['a'], hasNext: false }, { ids: ['b'] }]);
    expect(await collect(walkPages(fetchPage))).toEqual(['a']);
    expect(asked).toEqual([1]);
  });

  it('yields an item once when it shows up again on a later page (spec rule 5: keyed by _id)', async () => {
    const { fetchPage } = route([{ ids: ['a', 'b'] }, { ids: ['b', 'c'] }, { ids: ['c', 'd'] }]);
    expect(await collect(walkPages(fetchPage))).toEqual(['a', 'b', 'c', 'd']);
  });

  it('stops at an empty page even when the server says there is more', async () => {
    const { asked, fetchPage } = route([
      { ids: ['a'], hasNext: true },
      { ids: [], hasNext: true },
    ]);
    expect(await collect(walkPages(fetchPage))).toEqual(['a']);
    expect(asked).toEqual([1, 2]);
  });

  it('asks for one page only when there are no items', async () => {
    const { asked, fetchPage } = route([]);
    expect(await collect(walkPages(fetchPage))).toEqual([]);
    expect(asked).toEqual([1]);
  });

  it('asks for no further page when the caller stops early', async () => {
    const { asked, fetchPage } = route([{ ids: ['a', 'b'] }, { ids: ['c'] }]);
    for await (const item of walkPages(fetchPage)) if (item._id === 'a') break;
    expect(asked).toEqual([1]);
  });
});
