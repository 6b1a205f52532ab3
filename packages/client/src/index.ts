export { type ClientOptions, createClient, type TesseraClient, type WalkOptions } from './client.ts';
export { TesseraError } from './errors.ts';
export { hasNextPage, type PageInfo, walkPages } from './pagination.ts';
export type { Fetch, FetchResponse } from './request.ts';
export {
  hasLocalStorage,
  localStorageStorage,
  memoryStorage,
  parseTokenSet,
  type TokenSet,
  type TokenStorage,
} from './storage.ts';
export type * from './types.ts';
