import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Tessera } from './tessera.ts';

// What every view gets from the page: the client, and how to tell the page that the person signed
// out or that the session ended elsewhere. Views import this; app.tsx provides it.

/** Why the sign-in form is shown again, in the words the page uses. */
export const SIGNED_OUT = {
  ended:
    'Your session has ended: it expired, or was signed out in another tab or from another device. Sign in again to continue.',
  deleted:
    'Your account has been deleted, as scheduled. Signing in with this email again starts a new account.',
  here: 'You signed out of this device.',
  everywhere: 'You signed out on every device.',
} as const;

export interface ConsoleContext {
  tessera: Tessera;
  /**
   * Every failure of a signed-in call goes through here first: a 401 means the session ended
   * elsewhere, so the page returns to the sign-in form with the explanation (true: handled).
   */
  sessionEnded(error: unknown): boolean;
  /** After the person chose to sign out (here or everywhere). */
  signedOut(reason: keyof typeof SIGNED_OUT): void;
  /** After a sign-in or a completed registration: shows the registration or the account. */
  enter(): void;
  /** Set while this page signs out on purpose, so that the sign-out is not told as "ended elsewhere". */
  leaving: { current: boolean };
  /**
   * When the account shown is due to be erased (its deletion scheduled), else null: a session that
   * ends after that moment ended with the account, and is told so.
   */
  deletionDue: { current: string | null };
}

export const Context = createContext<ConsoleContext | null>(null);

export function useConsole(): ConsoleContext {
  const context = useContext(Context);
  if (!context) throw new Error('useConsole outside <App>');
  return context;
}
