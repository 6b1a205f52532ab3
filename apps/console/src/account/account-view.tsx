import type { User } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { useConsole } from '../console-context.ts';
import { DeleteAccountSection, DeletionScheduled } from './deletion.tsx';
import { ProfileSection } from './profile-section.tsx';
import { SecurityActivity } from './security-activity.tsx';
import { SessionsSection } from './sessions-section.tsx';

export const displayName = (user: User) =>
  [user.name, user.surname].filter(Boolean).join(' ') || user.username || user.email;

/** The signed-in person's page: the profile, where they are signed in, what happened, deletion. */
export function AccountView({ initialUser }: { initialUser: User }) {
  const { tessera, signedOut, leaving } = useConsole();
  const [user, setUser] = useState(initialUser);
  const [status, setStatus] = useState('');
  // Bumped after anything that adds a security event or ends a session, and when the tab is shown
  // again: the lists reload, and a session ended meanwhile is noticed then.
  const [refreshKey, setRefreshKey] = useState(0);
  const [focusDeletion, setFocusDeletion] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);
  const refresh = () => setRefreshKey((key) => key + 1);

  useEffect(() => {
    document.title = 'Your account';
    heading.current?.focus();
    const onVisible = () => {
      if (document.visibilityState === 'visible') refresh();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => document.removeEventListener('visibilitychange', onVisible);
  }, []);

  async function signOutHere() {
    leaving.current = true;
    try {
      // Ending this device's session also makes the client forget its tokens.
      for await (const session of tessera.sessions.all())
        if (session.current) await tessera.sessions.end(session._id);
    } catch {
      // Ended already, or the API is away: forgetting the tokens here is what is left to do.
    }
    await tessera.signOutLocally();
    signedOut('here');
  }

  const scheduled = user.accountDeletionStatus === 'scheduled' && user.accountDeletionScheduledFor;

  return (
    <main class="page">
      <div class="top">
        <div>
          <h1 ref={heading} tabIndex={-1}>
            {displayName(user)}
          </h1>
          <p class="muted">
            {user.email}
            {user.username && ` · @${user.username}`}
          </p>
        </div>
        <button type="button" class="secondary" onClick={() => void signOutHere()}>
          Sign out of this device
        </button>
      </div>
      <p role="status" class="status">
        {status}
      </p>
      {scheduled && (
        <DeletionScheduled
          scheduledFor={scheduled}
          focus={focusDeletion}
          onCancelled={(updated) => {
            setUser(updated);
            setStatus('Deletion cancelled: your account stays.');
            heading.current?.focus();
            refresh();
          }}
        />
      )}
      <ProfileSection
        user={user}
        onSaved={(updated) => {
          setUser(updated);
          refresh();
        }}
      />
      <SessionsSection refreshKey={refreshKey} onChanged={refresh} />
      <SecurityActivity refreshKey={refreshKey} />
      {!scheduled && (
        <DeleteAccountSection
          onScheduled={(updated) => {
            setStatus('');
            setFocusDeletion(true);
            setUser(updated);
            refresh();
          }}
        />
      )}
    </main>
  );
}
