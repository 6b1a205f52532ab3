import { type Static, type TSchema, Type } from 'typebox';
import { named } from './named-schema.ts';

const MAX_PAGE_SIZE = 100;
/** Far beyond any real list; keeps the row offset a safe integer. */
const MAX_PAGE = 1_000_000;

/** `?page=&limit=`: query strings are parsed, so `page=2` arrives as the integer 2. */
export const PaginationQuery = Type.Object({
  page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1 }),
  limit: Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: 10 }),
});
export type PaginationQuery = Static<typeof PaginationQuery>;

export const PaginationMeta = named(
  'Pagination',
  Type.Object(
    {
      currentPage: Type.Integer(),
      totalPages: Type.Integer(),
      totalItems: Type.Integer(),
      itemsPerPage: Type.Integer(),
      hasNextPage: Type.Boolean(),
      hasPrevPage: Type.Boolean(),
    },
    { additionalProperties: false },
  ),
  'Where a page stands in its list: hasNextPage is currentPage < totalPages, hasPrevPage is currentPage > 1.',
);
export type PaginationMeta = Static<typeof PaginationMeta>;

/** Schema of PaginatedResponseDto<T>: `{ list, pagination }`; `options` adds e.g. `examples`. */
export const Paginated = <T extends TSchema>(
  item: T,
  options: { description?: string; examples?: unknown[] } = {},
) =>
  Type.Object(
    { list: Type.Array(item), pagination: PaginationMeta },
    { additionalProperties: false, ...options },
  );

export type Paginated<T> = { list: T[]; pagination: PaginationMeta };

export function paginationMeta(query: PaginationQuery, totalItems: number): PaginationMeta {
  const totalPages = Math.ceil(totalItems / query.limit);
  return {
    currentPage: query.page,
    totalPages,
    totalItems,
    itemsPerPage: query.limit,
    hasNextPage: query.page < totalPages,
    hasPrevPage: query.page > 1,
  };
}

/** Rows to skip for the requested page. */
export function pageOffset(query: PaginationQuery): number {
  return (query.page - 1) * query.limit;
}
