import type { PaginationQuery } from '@tessera/contracts';
import { pageOffset } from '@tessera/contracts';
import type { SessionsContext } from './sessions.context.ts';
import * as repository from './sessions.repository.ts';

/** The user's active sessions, newest first: one page of them and how many there are. */
export function listSessions({ db, clock }: SessionsContext) {
  return async (userId: string, query: PaginationQuery) => {
    const now = clock.now();
    const [totalItems, sessions] = await Promise.all([
      repository.countActiveSessions(db, userId, now),
      repository.listActiveSessions(db, userId, now, { limit: query.limit, offset: pageOffset(query) }),
    ]);
    return { sessions, totalItems };
  };
}
