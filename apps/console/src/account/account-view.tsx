import type { User } from '@tessera/client';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { Button, useBusy } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { failureText, isFailure } from '../failure-text.ts';
import { useFocusFallback } from '../focus-fallback.ts';
import { displayEmail } from '../format.ts';
import { MessageText, useMessage } from '../message.tsx';
import { DeleteAccountSection, DeletionScheduled } from './deletion.tsx';
import { ProfileSection } from './profile-section.tsx';
import { SecurityActivity } from './security-activity.tsx';
import { SessionsSection } from './sessions-section.tsx';

/** The person's name, each part isolated: a right-to-left part does not turn the other around. */
const DisplayName = ({ user }: { user: User }) =>
  user.name || user.surname ? (
    <>
      {user.name && <bdi>{user.name}</bdi>}
      {user.name && user.surname && ' '}
      {user.surname && <bdi>{user.surname}</bdi>}
    </>
  ) : (
    <bdi>{user.username || displayEmail(user.email)}</bdi>
  );

/** The signed-in person's page: the profile, where they are signed in, what happened, deletion. */
export function AccountView({ initialUser }: { initialUser: User }) {
  const { tessera, signedOut, leaving, deletionDue, sessionEnded } = useConsole();
  const [user, setUser] = useState(initialUser);
  const [status, say] = useMessage();
  const [signOutError, setSignOutError] = useState<string | undefined>();
  const { busy, run } = useBusy();
  // Bumped after anything that adds a security event or ends a session, and when the tab is shown
  // again: the lists reload, and a session ended meanwhile is noticed then.
  const [refreshKey, setRefreshKey] = useState(0);
  const [focusDeletion, setFocusDeletion] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);
  const keepFocus = useFocusFallback(heading);
  /** Whether this tab's own scheduling or cancelling is about to make the deletion scheduled. */
  const ownChange = useRef<boolean | null>(null);
  const refresh = () => setRefreshKey((key) => key + 1);
  // Something went through: a sign-out that could not be made is no longer the news.
  const changed = () => {
    setSignOutError(undefined);
    refresh();
  };

  useEffect(() => {
    document.title = 'Your account';
    heading.current?.focus();
    const onVisible = () => {
      if (document.visibilityState !== 'visible') return;
      refresh();
      // A deletion scheduled or cancelled in another tab shows here too (an ended session: the lists say it).
      tessera.users.me().then(
        (found) => {
          keepFocus();
          setUser(found);
        },
        (error: unknown) => sessionEnded(error),
      );
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => document.removeEventListener('visibilitychange', onVisible);
  }, []);

  async function signOutHere() {
    setSignOutError(undefined);
    leaving.current = true;
    try {
      // Ending this device's session also makes the client forget its tokens.
      for await (const session of tessera.sessions.all()) {
        if (!session.current) continue;
        await tessera.sessions.end(session._id);
        break;
      }
    } catch (failure) {
      // 401: the session had ended already; 404 or 409: it ended meanwhile. Anything else (no
      // answer, a 5xx) left it active on the server: say so, stay signed in, and let them try again.
      if (!isFailure(failure) || ![401, 404, 409].includes(failure.status)) {
        leaving.current = false;
        setSignOutError(
          `This device could not be signed out, so it stays signed in. ${failureText(failure)}`,
        );
        return;
      }
    }
    await tessera.signOutLocally();
    signedOut('here');
  }

  const scheduled = user.accountDeletionStatus === 'scheduled' && user.accountDeletionScheduledFor;
  deletionDue.current = scheduled || null;

  // Before the page is painted: no moment shows the new state with what was said of the old one.
  useLayoutEffect(() => {
    const own = ownChange.current === Boolean(scheduled);
    ownChange.current = null;
    if (own) return;
    // Scheduled or cancelled elsewhere, seen on a reload: what this tab said of the deletion, and
    // the focus meant for its own scheduling, are old news.
    say();
    setFocusDeletion(false);
  }, [Boolean(scheduled)]);

  return (
    <main class="page">
      <div class="top">
        <div>
          <h1 ref={heading} tabIndex={-1}>
            <DisplayName user={user} />
          </h1>
          <p class="muted">
            {displayEmail(user.email)}
            {user.username && ` · @${user.username}`}
          </p>
        </div>
        <Button type="button" class="secondary" busy={busy} onClick={() => void run(signOutHere)}>
          Sign out of this device
        </Button>
      </div>
      {signOutError && (
        <p class="alert" role="alert">
          {signOutError}
        </p>
      )}
      <p role="status" class="status">
        <MessageText message={status} />
      </p>
      {scheduled && (
        <DeletionScheduled
          scheduledFor={scheduled}
          focus={focusDeletion}
          onCancelled={(updated) => {
            ownChange.current = false;
            // "Cancel deletion", which has the focus, goes away.
            keepFocus();
            setUser(updated);
            setFocusDeletion(false);
            say('Deletion cancelled: your account stays.');
            changed();
          }}
        />
      )}
      <ProfileSection
        user={user}
        onSaved={(updated) => {
          setUser(updated);
          changed();
        }}
      />
      <SessionsSection refreshKey={refreshKey} onChanged={changed} />
      <SecurityActivity refreshKey={refreshKey} />
      {!scheduled && (
        <DeleteAccountSection
          onScheduled={(updated) => {
            ownChange.current = true;
            say();
            setFocusDeletion(true);
            setUser(updated);
            changed();
          }}
        />
      )}
    </main>
  );
}
