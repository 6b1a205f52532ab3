import type { PaginationQuery } from '@tessera/contracts';
import { pageOffset } from '@tessera/contracts';
import type { SessionsContext } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

/** The user's active sessions, newest first: one page of them and how many there are. */
export function listSessions({ db, clock }: SessionsContext) {
  return (userId: string, query: PaginationQuery) =>
    repository.listActiveSessions(db, userId, clock.now(), { limit: query.limit, offset: pageOffset(query) });
}
