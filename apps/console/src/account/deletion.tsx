import type { User } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Button, useBusy } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { failureText, isFailure } from '../failure-text.ts';
import { formatDate, formatTime } from '../format.ts';
import type { Tessera } from '../tessera.ts';

/**
 * The account as it is now, after a 409 said it changed elsewhere: null when the session has ended
 * meanwhile (`sessionEnded` has taken over), undefined when the reload failed otherwise.
 */
const reloaded = (tessera: Tessera, sessionEnded: (failure: unknown) => boolean) =>
  tessera.users.me().catch((failure: unknown) => (sessionEnded(failure) ? null : undefined));

/** "Delete account", confirmed in a modal dialog; the API schedules the deletion after a grace period. */
export function DeleteAccountSection({ onScheduled }: { onScheduled: (user: User) => void }) {
  const { tessera, sessionEnded } = useConsole();
  const dialog = useRef<HTMLDialogElement>(null);
  const [error, setError] = useState<string | undefined>();
  const [dialogOpen, setDialogOpen] = useState(false);
  const { busy, run } = useBusy();

  function open() {
    setError(undefined);
    // A modal dialog: the page behind is inert, Escape closes it, focus returns to this button.
    dialog.current?.showModal();
    setDialogOpen(true);
  }

  async function confirm() {
    setError(undefined);
    try {
      const user = await tessera.users.requestDeletion();
      dialog.current?.close();
      onScheduled(user);
    } catch (failure) {
      if (sessionEnded(failure)) return;
      // 409: scheduled meanwhile, in another tab or on another device; show it as it now is.
      const user =
        isFailure(failure) && failure.status === 409 ? await reloaded(tessera, sessionEnded) : undefined;
      if (user === null) return;
      if (user?.accountDeletionStatus === 'scheduled') {
        dialog.current?.close();
        onScheduled(user);
      } else setError(failureText(failure));
    }
  }

  // In the dialog while it is open; under the button once it was closed (Escape) before the answer.
  const shownError = error && (
    <p class="alert" role="alert">
      {error}
    </p>
  );

  return (
    <section class="card" aria-labelledby="delete-heading">
      <h2 id="delete-heading">Delete account</h2>
      <p>
        Your profile and personal data are erased after a grace period. Until then you can sign in and cancel
        the deletion.
      </p>
      <button type="button" class="danger" onClick={open}>
        Delete account
      </button>
      {!dialogOpen && shownError}
      <dialog
        ref={dialog}
        aria-labelledby="delete-dialog-heading"
        aria-describedby="delete-dialog-text"
        onClose={() => setDialogOpen(false)}
      >
        <h2 id="delete-dialog-heading">Delete your account?</h2>
        <p id="delete-dialog-text">
          Your account will be scheduled for deletion and erased at the end of the grace period, with every
          session and your activity. We email you the date. Until then, signing in and choosing “Cancel
          deletion” keeps everything.
        </p>
        {dialogOpen && shownError}
        <div class="actions">
          <Button type="button" class="danger" busy={busy} onClick={() => void run(confirm)}>
            Delete my account
          </Button>
          {/* biome-ignore lint/a11y/noAutofocus: an opened confirmation starts on the safe choice */}
          <button type="button" class="secondary" autoFocus onClick={() => dialog.current?.close()}>
            Keep my account
          </button>
        </div>
      </dialog>
    </section>
  );
}

/** Shown while the deletion is scheduled: when, and the way back. */
export function DeletionScheduled({
  scheduledFor,
  focus,
  onCancelled,
}: {
  scheduledFor: string;
  focus: boolean;
  onCancelled: (user: User) => void;
}) {
  const { tessera, sessionEnded } = useConsole();
  const [error, setError] = useState<string | undefined>();
  const { busy, run } = useBusy();
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    if (focus) heading.current?.focus();
  }, [focus]);

  async function cancel() {
    setError(undefined);
    try {
      onCancelled(await tessera.users.cancelDeletion());
    } catch (failure) {
      if (sessionEnded(failure)) return;
      // 409: cancelled meanwhile elsewhere (the account stays), or already due (it does not).
      const user =
        isFailure(failure) && failure.status === 409 ? await reloaded(tessera, sessionEnded) : undefined;
      if (user === null) return;
      if (user && user.accountDeletionStatus !== 'scheduled') onCancelled(user);
      else setError(failureText(failure));
    }
  }

  return (
    <section class="notice" aria-labelledby="deletion-heading">
      {/* Focused once this tab scheduled it: the date is read with the heading. */}
      <h2 id="deletion-heading" ref={heading} tabIndex={-1} aria-describedby="deletion-date">
        Deletion scheduled
      </h2>
      <p id="deletion-date">
        Your account is scheduled for deletion on{' '}
        <time dateTime={scheduledFor}>
          <strong>{formatDate(scheduledFor)}</strong> at {formatTime(scheduledFor)}
        </time>
        . Until then you can cancel and keep everything.
      </p>
      {error && (
        <p class="alert" role="alert">
          {error}
        </p>
      )}
      <Button type="button" busy={busy} onClick={() => void run(cancel)}>
        Cancel deletion
      </Button>
    </section>
  );
}
