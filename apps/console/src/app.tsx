import type { Registration, User } from '@tessera/client';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { AccountView } from './account/account-view.tsx';
import { Button } from './busy.tsx';
import { type ConsoleContext, Context, SIGNED_OUT } from './console-context.ts';
import { failureText, isFailure } from './failure-text.ts';
import { RegistrationView } from './registration/registration-view.tsx';
import { SignInView } from './sign-in/sign-in-view.tsx';
import type { Tessera } from './tessera.ts';

type Screen =
  | { name: 'loading' }
  | { name: 'sign-in'; notice?: string }
  | { name: 'registration'; registration: Registration; user: User }
  | { name: 'account'; user: User }
  /** `failures` counts the failures in a row; `retrying`: "Try again" asks the API again. */
  | { name: 'failed'; message: string; failures: number; retrying?: boolean };

/** Subscribes to the client's session changes (this tab's and other tabs'). */
export type SessionChanges = (listener: (signedIn: boolean) => void) => void;

const LOADING: Screen = { name: 'loading' };

export function App({ tessera, onSessionChange }: { tessera: Tessera; onSessionChange: SessionChanges }) {
  const [screen, setScreen] = useState<Screen>(LOADING);
  // True while this page itself signs out, so the client's "signed out" is not told as "ended elsewhere".
  const leaving = useRef(false);
  const deletionDue = useRef<string | null>(null);
  /** Why the session ended: with the account, when it was due to be erased by now, else elsewhere. */
  const endedNotice = () => {
    const due = deletionDue.current;
    return due !== null && Date.parse(due) <= Date.now() ? SIGNED_OUT.deleted : SIGNED_OUT.ended;
  };

  const context = useMemo<ConsoleContext>(
    () => ({
      tessera,
      leaving,
      deletionDue,
      enter() {
        // Another sign-in: the account shown next says for itself whether its deletion is due.
        deletionDue.current = null;
        setScreen((current) => (current.name === 'loading' ? current : LOADING));
      },
      sessionEnded(error) {
        // The API's own 401, not a proxy's page (a network error with that status).
        if (!isFailure(error) || error.status !== 401 || error.isNetworkError) return false;
        void tessera.signOutLocally();
        setScreen({ name: 'sign-in', notice: endedNotice() });
        return true;
      },
      signedOut(reason) {
        leaving.current = false;
        setScreen({ name: 'sign-in', notice: SIGNED_OUT[reason] });
      },
    }),
    [tessera],
  );

  useEffect(() => {
    onSessionChange((signedIn) => {
      if (leaving.current) return;
      setScreen((current) => {
        if (!signedIn)
          return current.name === 'sign-in' ? current : { name: 'sign-in', notice: endedNotice() };
        // Signed in in another tab while this one shows the sign-in form: follow it.
        return current.name === 'sign-in' ? LOADING : current;
      });
    });
  }, [onSessionChange]);

  // The registration completed in another tab: shown again, this one moves on to the account.
  useEffect(() => {
    if (screen.name !== 'registration') return;
    const onVisible = () => {
      if (document.visibilityState !== 'visible') return;
      tessera.users.registration().then(
        ({ isRegistrationComplete }) => {
          if (isRegistrationComplete)
            setScreen((current) => (current.name === 'registration' ? LOADING : current));
        },
        (error: unknown) => context.sessionEnded(error),
      );
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => document.removeEventListener('visibilitychange', onVisible);
  }, [screen.name, tessera, context]);

  // Whether to show the registration or the account is the API's to say, on every entry.
  useEffect(() => {
    if (screen.name !== 'loading' && !(screen.name === 'failed' && screen.retrying)) return;
    let shown = true;
    (async (): Promise<Screen> => {
      if (!(await tessera.isSignedIn())) return { name: 'sign-in' };
      const [registration, user] = await Promise.all([tessera.users.registration(), tessera.users.me()]);
      return registration.isRegistrationComplete
        ? { name: 'account', user }
        : { name: 'registration', registration, user };
    })().then(
      (next) => {
        if (shown) setScreen(next);
      },
      (error: unknown) => {
        if (shown && !context.sessionEnded(error))
          setScreen({
            name: 'failed',
            message: failureText(error),
            failures: screen.name === 'failed' ? screen.failures + 1 : 1,
          });
      },
    );
    return () => {
      shown = false;
    };
  }, [screen, tessera, context]);

  return (
    <Context.Provider value={context}>
      {screen.name === 'loading' && <Loading />}
      {screen.name === 'sign-in' && <SignInView notice={screen.notice} />}
      {screen.name === 'registration' && (
        <RegistrationView registration={screen.registration} user={screen.user} />
      )}
      {screen.name === 'account' && <AccountView initialUser={screen.user} />}
      {screen.name === 'failed' && (
        <Failed
          message={screen.message}
          failures={screen.failures}
          retrying={screen.retrying}
          // The view stays while the API is asked again, and so does the focus on its button.
          onRetry={() => setScreen({ ...screen, retrying: true })}
        />
      )}
    </Context.Provider>
  );
}

function Loading() {
  useEffect(() => {
    document.title = 'Loading your account';
  }, []);
  return (
    <main class="page page--narrow">
      <p role="status">Loading your account…</p>
    </main>
  );
}

/**
 * The page could not load the account for another reason than an ended session (the API is down,
 * or the caller is over the rate limit). "Try again" asks the API again, or, without `onRetry`,
 * reloads the page; a reload also asks for the page itself, which a rate limit refuses too.
 */
export function Failed({
  message,
  failures = 1,
  retrying = false,
  onRetry,
}: {
  message: string;
  failures?: number;
  retrying?: boolean;
  onRetry?: () => void;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  // Shown in place of another view, whose focused element is gone: the focus goes to the heading.
  useEffect(() => {
    document.title = 'Error: Your account';
    heading.current?.focus();
  }, []);
  return (
    <main class="page page--narrow">
      <h1 ref={heading} tabIndex={-1}>
        Your account
      </h1>
      {/* A new alert for every failure: the same words after "Try again" are announced again. */}
      <p key={failures} role="alert" class="alert">
        {message}
      </p>
      <Button type="button" busy={retrying} onClick={onRetry ?? (() => window.location.reload())}>
        Try again
      </Button>
    </main>
  );
}
