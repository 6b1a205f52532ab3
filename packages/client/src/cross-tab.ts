import { asTokenSet, type TokenSet } from './storage.ts';

/** What one client tells the others with the same base URL and storage key (other tabs, workers). */
export type TabMessage =
  /** The refresh token `from` was rotated into `tokens`: a client still holding `from` adopts them. */
  | { type: 'refreshed'; from: string; tokens: TokenSet }
  /** The session of `refreshToken` ended (sign-out, or a refresh answered 401). */
  | { type: 'signed-out'; refreshToken: string };

export interface CrossTab {
  /** Runs `task` while no other client of the same name runs one (Web Locks); directly where there are none. */
  exclusive<T>(task: () => Promise<T>): Promise<T>;
  announce(message: TabMessage): void;
  close(): void;
}

// The few members of the Web Locks and BroadcastChannel APIs used here, so the package needs no DOM types.
interface LockManager {
  request<T>(name: string, options: { signal?: unknown }, callback: () => Promise<T>): Promise<T>;
}
interface Channel {
  onmessage: ((event: { data: unknown }) => void) | null;
  postMessage(message: unknown): void;
  close(): void;
  /** Node only: an open channel would otherwise keep the process alive. */
  unref?(): void;
}
interface Environment {
  navigator?: { locks?: LockManager };
  BroadcastChannel?: new (name: string) => Channel;
  AbortSignal?: { timeout?(milliseconds: number): unknown };
}

/**
 * How long a client waits for another's refresh before refreshing itself: a tab whose refresh hangs
 * must not stall the others for good, and the server's reuse grace answers a late twin refresh.
 */
const LOCK_WAIT_MS = 10_000;

/**
 * Web Locks and a BroadcastChannel named `name`, each where the runtime has it (React Native has
 * neither). Without `receive`, no channel: the tokens are this context's alone (a memory store), and
 * the lock only keeps the clients sharing that store to one refresh.
 */
export function crossTab(name: string, receive?: (message: TabMessage) => void): CrossTab {
  const env = globalThis as unknown as Environment;
  const locks = env.navigator?.locks;
  let channel = receive && env.BroadcastChannel ? new env.BroadcastChannel(name) : undefined;
  if (receive && channel) {
    channel.onmessage = (event) => {
      if (isTabMessage(event.data)) receive(event.data);
    };
    channel.unref?.();
  }
  return {
    async exclusive(task) {
      if (!locks) return task();
      let started = false;
      const signal = env.AbortSignal?.timeout?.(LOCK_WAIT_MS);
      try {
        return await locks.request(name, signal ? { signal } : {}, () => {
          started = true;
          return task();
        });
      } catch (error) {
        // Gave up waiting for the lock: refresh anyway. An error of the task itself is the caller's.
        if (started) throw error;
        return task();
      }
    },
    announce(message) {
      channel?.postMessage(message);
    },
    close() {
      // A closed channel throws on postMessage: the client goes on, announcing nothing.
      channel?.close();
      channel = undefined;
    },
  };
}

function isTabMessage(value: unknown): value is TabMessage {
  if (typeof value !== 'object' || value === null) return false;
  const message = value as Record<string, unknown>;
  if (message.type === 'signed-out') return typeof message.refreshToken === 'string';
  return (
    message.type === 'refreshed' && typeof message.from === 'string' && asTokenSet(message.tokens) !== null
  );
}
