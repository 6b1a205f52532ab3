import { API, tokensOf } from './gateway-client.ts';
import type { Call, Feed } from './http-load.ts';
import type { Population, Session } from './population.ts';

export const SCENARIO_NAMES = [
  'send',
  'verify-new',
  'verify-returning',
  'refresh',
  'list-sessions',
  'revoke',
  'logout',
  'mail-drain',
] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/**
 * One HTTP flow. A scenario that `consumes` makes exactly one request per prepared item (a code is
 * used once, a session is ended once), so its run is sized in requests; the others run for a duration.
 */
export interface HttpScenario {
  name: ScenarioName;
  title: string;
  consumes: boolean;
  /** What `count` requests need (for consuming scenarios), or what an endless run needs. */
  prepare(population: Population, count: number, connections: number): Promise<Feed>;
}

const post = (path: string, body: unknown, token?: string): Call => ({
  method: 'POST',
  path: `${API}${path}`,
  body,
  ...(token && { token }),
});

/**
 * One request per item, in order. Should more requests be asked for than there are items (it does
 * not happen when runs are sized in requests), the extra ones are sent invalid and counted as failures.
 */
function onePerItem<Item>(
  items: readonly Item[],
  call: (item: Item) => Call,
  exhausted: Call,
  settle: (status: number, body: string, item: Item) => void,
): Feed<Item> {
  let next = 0;
  return {
    next() {
      const item = items[next++];
      return item === undefined ? { call: exhausted } : { call: call(item), item };
    },
    settle(status, body, item) {
      if (item !== undefined) settle(status, body, item);
    },
  };
}

/** Signs in with each code; every success is a session later scenarios can use. */
function verifyFeed(population: Population, codes: ReadonlyArray<{ email: string; code: string }>) {
  return onePerItem(
    codes,
    ({ email, code }) => post('/verify-otp-email', { email, code }),
    post('/verify-otp-email', { email: 'exhausted@example.com', code: '0000' }),
    (status, body, { email }) => {
      const tokens = status === 200 ? tokensOf(body) : undefined;
      if (tokens) population.record(email, tokens);
    },
  );
}

/** Marks a session as sent, so that an answer never read (the run ended first) keeps it out of later use. */
function inFlight(session: Session): Session {
  session.inFlight = true;
  return session;
}

export const HTTP_SCENARIOS: HttpScenario[] = [
  {
    name: 'send',
    title: 'send code',
    consumes: false,
    async prepare(population) {
      // A new address every time: each request creates and stores a code and queues its email.
      return { next: () => ({ call: post('/send-otp-email', { email: population.freshEmail('send') }) }) };
    },
  },
  {
    name: 'verify-new',
    title: 'verify code, new user',
    consumes: true,
    async prepare(population, count) {
      const emails = Array.from({ length: count }, () => population.freshEmail('new'));
      return verifyFeed(population, await population.sendCodes(emails));
    },
  },
  {
    name: 'verify-returning',
    title: 'verify code, returning user',
    consumes: true,
    async prepare(population, count) {
      const emails = await population.existingUsers(count);
      return verifyFeed(population, await population.sendCodes(emails));
    },
  },
  {
    name: 'refresh',
    title: 'refresh',
    consumes: false,
    async prepare(population, _count, connections) {
      // Sessions take turns: each request rotates the current token of one session, and the answer's
      // new token waits at the back of the line, so no token is presented twice.
      const line: Session[] = [...(await population.activeSessions(Math.max(256, connections * 16)))];
      const exhausted = post('/refresh-token', { refreshToken: 'exhausted' });
      return {
        next() {
          const session = line.shift();
          return session
            ? {
                call: post('/refresh-token', { refreshToken: inFlight(session).refreshToken }),
                item: session,
              }
            : { call: exhausted };
        },
        settle(status, body, session) {
          if (!session) return;
          const tokens = status === 200 ? tokensOf(body) : undefined;
          if (!tokens) {
            session.ended = true;
            return;
          }
          Object.assign(session, tokens, { inFlight: false });
          line.push(session);
        },
      } satisfies Feed<Session>;
    },
  },
  {
    name: 'list-sessions',
    title: 'list sessions',
    consumes: false,
    async prepare(population, _count, connections) {
      const sessions = await population.usersWithSession(Math.max(64, connections * 4));
      let turn = 0;
      return {
        next: () => {
          const session = sessions[turn++ % sessions.length] as Session;
          return {
            call: { method: 'GET', path: `${API}/sessions?page=1&limit=10`, token: session.accessToken },
          };
        },
      };
    },
  },
  {
    name: 'revoke',
    title: 'revoke',
    consumes: true,
    async prepare(population, count) {
      return onePerItem(
        await population.activeSessions(count),
        (session) =>
          post('/revoke-token', { refreshToken: inFlight(session).refreshToken }, session.accessToken),
        post('/revoke-token', { refreshToken: 'exhausted' }),
        // Ended, or in a state the bench does not know (a refusal): either way not used again.
        (_status, _body, session) => {
          session.ended = true;
          session.inFlight = false;
        },
      );
    },
  },
  {
    name: 'logout',
    title: 'logout',
    consumes: true,
    async prepare(population, count) {
      // New users with one session each: users of the earlier flows hold as many sessions as those
      // flows' throughput gave them, and logout ends them all.
      return onePerItem(
        await population.signInNewUsers(count),
        (session) => post('/logout', {}, inFlight(session).accessToken),
        post('/logout', {}),
        (status, _body, session) => {
          session.inFlight = false;
          if (status === 200) population.endUser(session.email);
        },
      );
    },
  },
];
