import { type GatewayClient, inParallel, type SignedIn } from './gateway-client.ts';

/** A session the bench holds the current tokens of. */
export interface Session extends SignedIn {
  email: string;
  ended: boolean;
  /** Sent in a request whose answer has not been read: its tokens may be stale, so it is not reused. */
  inFlight: boolean;
}

const usable = (session: Session) => !session.ended && !session.inFlight;

/**
 * The users and sessions one gateway knows, as the bench saw them being created (in preparation and
 * in the measured sign-ins), so later scenarios reuse them and sign in only what is missing.
 */
export class Population {
  private readonly users = new Map<string, Session[]>();
  private serial = 0;

  private readonly client: GatewayClient;
  private readonly parallel: number;

  constructor(client: GatewayClient, parallel: number) {
    this.client = client;
    this.parallel = parallel;
  }

  /** An address no user has yet. */
  freshEmail(kind: string): string {
    return `${kind}-${++this.serial}@example.com`;
  }

  /** Records a successful sign-in of `email`. */
  record(email: string, tokens: SignedIn): Session {
    const session: Session = { email, ...tokens, ended: false, inFlight: false };
    const sessions = this.users.get(email);
    if (sessions) sessions.push(session);
    else this.users.set(email, [session]);
    return session;
  }

  endUser(email: string): void {
    for (const session of this.users.get(email) ?? []) session.ended = true;
  }

  /** A code for each address (the latest code of an address replaces the one before). */
  sendCodes(emails: readonly string[]): Promise<Array<{ email: string; code: string }>> {
    return inParallel(emails, this.parallel, async (email) => ({
      email,
      code: await this.client.sendCode(email),
    }));
  }

  /** Signs in `count` new users, once each; answers their sessions. */
  async signInNewUsers(count: number): Promise<Session[]> {
    const emails = Array.from({ length: count }, () => this.freshEmail('user'));
    const sessions: Session[] = [];
    await inParallel(emails, this.parallel, async (email) => {
      sessions.push(this.record(email, await this.client.signIn(email)));
    });
    return sessions;
  }

  /** `count` distinct existing users, signing in new ones when there are not enough. */
  async existingUsers(count: number): Promise<string[]> {
    if (this.users.size < count) await this.signInNewUsers(count - this.users.size);
    return [...this.users.keys()].slice(0, count);
  }

  /** `count` distinct usable sessions, signing in new users when there are not enough. */
  async activeSessions(count: number): Promise<Session[]> {
    const found = [...this.users.values()].flat().filter(usable);
    if (found.length < count) {
      await this.signInNewUsers(count - found.length);
      return this.activeSessions(count);
    }
    return found.slice(0, count);
  }

  /** `count` distinct users with a usable session each (that session), signing in new users when needed. */
  async usersWithSession(count: number): Promise<Session[]> {
    const found: Session[] = [];
    for (const sessions of this.users.values()) {
      const session = sessions.find(usable);
      if (session && !sessions.some((s) => s.inFlight)) found.push(session);
    }
    if (found.length < count) {
      await this.signInNewUsers(count - found.length);
      return this.usersWithSession(count);
    }
    return found.slice(0, count);
  }
}
