import { endSessionById, logoutEverywhere, revokeByRefreshToken } from './end.ts';
import { listSessions } from './list.ts';
import { refreshSession } from './refresh.ts';
import type { SessionsContext } from './sessions.context.ts';
import { startSession } from './start.ts';

export type Sessions = ReturnType<typeof createSessions>;

/** The session operations, each in its own file, sharing one repository and one context. */
export function createSessions(context: SessionsContext) {
  return {
    start: startSession(context),
    refresh: refreshSession(context),
    revoke: revokeByRefreshToken(context),
    end: endSessionById(context),
    logout: logoutEverywhere(context),
    list: listSessions(context),
  };
}
