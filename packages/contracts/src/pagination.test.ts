import { describe, expect, it } from 'vitest';
import { pageOffset, paginationMeta } from './pagination.ts';

describe('paginationMeta', () => {
  it('follows the contract arithmetic', () => {
    expect(paginationMeta({ page: 2, limit: 10 }, 25)).toEqual({
      currentPage: 2,
      totalPages: 3,
      totalItems: 25,
      itemsPerPage: 10,
      hasNextPage: true,
      hasPrevPage: true,
    });
    expect(paginationMeta({ page: 1, limit: 10 }, 0)).toMatchObject({
      totalPages: 0,
      hasNextPage: false,
      hasPrevPage: false,
    });
    expect(paginationMeta({ page: 3, limit: 10 }, 30)).toMatchObject({ totalPages: 3, hasNextPage: false });
    expect(paginationMeta({ page: 7, limit: 10 }, 30)).toMatchObject({
      currentPage: 7,
      hasNextPage: false,
      hasPrevPage: true,
    });
    expect(pageOffset({ page: 3, limit: 25 })).toBe(50);
  });
});
