/** The pagination fields the rules need; `hasNextPage` is optional in the specification. */
export interface PageInfo {
  currentPage: number;
  totalPages: number;
  hasNextPage?: boolean;
}

/** Whether a next page exists: `hasNextPage` when the server sent it, else `currentPage < totalPages` (spec rule 3). */
export function hasNextPage(pagination: PageInfo): boolean {
  return pagination.hasNextPage ?? pagination.currentPage < pagination.totalPages;
}

/**
 * Every item of a paginated route, page after page from `page` 1, each `_id` once (spec rule 5: items
 * are keyed by `_id`, so an item that moves to the next page while walking is not yielded again).
 * Stops after the last page, or at an empty page, so a server that keeps saying "more" cannot loop it.
 */
export async function* walkPages<Item extends { _id: string }>(
  fetchPage: (page: number) => Promise<{ list: Item[]; pagination: PageInfo }>,
): AsyncGenerator<Item, void, undefined> {
  const seen = new Set<string>();
  for (let page = 1; ; page += 1) {
    const { list, pagination } = await fetchPage(page);
    for (const item of list) {
      if (seen.has(item._id)) continue;
      seen.add(item._id);
      yield item;
    }
    if (list.length === 0 || !hasNextPage(pagination)) return;
  }
}
