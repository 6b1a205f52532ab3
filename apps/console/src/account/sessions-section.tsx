import type { Session } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Button, useBusy } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { deviceName } from '../device-name.ts';
import { failureText, isFailure } from '../failure-text.ts';
import { useFocusFallback } from '../focus-fallback.ts';
import { formatAgo, formatDateTime } from '../format.ts';
import { MessageText, useMessage } from '../message.tsx';
import { sessionLabels } from './session-labels.ts';

/** Every active session of the account (all pages), this one marked, the others each with a sign-out. */
export function SessionsSection({ refreshKey, onChanged }: { refreshKey: number; onChanged: () => void }) {
  const { tessera, sessionEnded, signedOut, leaving } = useConsole();
  const [sessions, setSessions] = useState<Session[] | null>(null);
  const [error, setError] = useState<string | undefined>();
  const [status, setStatus] = useMessage();
  const { busy, run } = useBusy();
  const heading = useRef<HTMLHeadingElement>(null);
  const keepFocus = useFocusFallback(heading);

  useEffect(() => {
    let current = true;
    (async () => {
      const found: Session[] = [];
      for await (const session of tessera.sessions.all()) found.push(session);
      return found;
    })().then(
      (found) => {
        if (!current) return;
        keepFocus();
        setSessions(found);
        setError(undefined);
      },
      (failure: unknown) => {
        if (current && !sessionEnded(failure)) setError(failureText(failure));
      },
    );
    return () => {
      current = false;
    };
  }, [refreshKey, tessera, sessionEnded]);

  async function end(session: Session) {
    setError(undefined);
    try {
      await tessera.sessions.end(session._id);
      setStatus(`Signed out ${deviceName(session.userAgent)}.`);
    } catch (failure) {
      if (sessionEnded(failure)) return;
      // 404 or 409: that session had ended already, which is what was asked. Anything else left it
      // active, so it stays listed.
      if (!isFailure(failure) || (failure.status !== 404 && failure.status !== 409)) {
        setError(failureText(failure));
        return;
      }
    }
    // Its row, and the focused button in it, go away.
    keepFocus();
    setSessions((list) => list?.filter((item) => item._id !== session._id) ?? null);
    onChanged();
  }

  async function endAll() {
    setError(undefined);
    leaving.current = true;
    try {
      await tessera.auth.logout();
      signedOut('everywhere');
    } catch (failure) {
      leaving.current = false;
      if (!sessionEnded(failure)) setError(failureText(failure));
    }
  }

  const now = new Date();
  const labels = sessionLabels(sessions?.filter((session) => !session.current) ?? []);

  return (
    <section class="card" aria-labelledby="sessions-heading">
      <h2 id="sessions-heading" ref={heading} tabIndex={-1}>
        Sessions
      </h2>
      <p class="muted">Where your account is signed in now.</p>
      {sessions === null && !error && <p>Loading sessions…</p>}
      {sessions && (
        // biome-ignore lint/a11y/noRedundantRoles: VoiceOver on Safari drops the role of a list without bullets
        <ul class="items" role="list">
          {sessions.map((session) => (
            <li key={session._id}>
              <div class="item-main">
                <p class="item-title">
                  {deviceName(session.userAgent)}
                  {session.current && <span class="badge">This device</span>}
                </p>
                <p class="item-meta">
                  IP {session.ipAddress ?? 'unknown'} · Last used{' '}
                  <time dateTime={session.lastUsedAt}>{formatAgo(session.lastUsedAt, now)}</time>
                  {/* The exact time in the text, not in a tooltip that keyboards and screen readers miss. */}
                  {` (${formatDateTime(session.lastUsedAt)})`} · Signed in {formatDateTime(session.createdAt)}
                </p>
              </div>
              {!session.current && (
                <Button
                  type="button"
                  class="secondary"
                  busy={busy}
                  onClick={() => void run(() => end(session))}
                >
                  Sign out
                  {/* Which session, in the button's name (sessionLabels). */}
                  <span class="visually-hidden"> {labels.get(session._id)}</span>
                </Button>
              )}
            </li>
          ))}
        </ul>
      )}
      {error && (
        <p class="alert" role="alert">
          {error}
        </p>
      )}
      <p role="status" class="status">
        <MessageText message={status} />
      </p>
      <div class="actions">
        <Button type="button" class="danger secondary" busy={busy} onClick={() => void run(endAll)}>
          Sign out everywhere
        </Button>
      </div>
    </section>
  );
}
