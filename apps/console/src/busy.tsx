import type { ComponentChildren } from 'preact';
import { useCallback, useRef, useState } from 'preact/hooks';

/**
 * One action at a time: `run(task)` does nothing while an earlier task still runs (a second Enter,
 * a double click), and `busy` says that one does, for the buttons to show it.
 */
export function useBusy(): { busy: boolean; run: (task: () => Promise<void>) => Promise<void> } {
  const running = useRef(false);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (task: () => Promise<void>) => {
    if (running.current) return;
    running.current = true;
    setBusy(true);
    try {
      await task();
    } finally {
      running.current = false;
      setBusy(false);
    }
  }, []);
  return { busy, run };
}

interface ButtonProps {
  type: 'button' | 'submit';
  class?: string;
  /** Its request runs: shown, and clicks are ignored until it is done. */
  busy?: boolean;
  /** Not possible yet (a wait that `aria-describedby` explains): clicks are ignored. */
  unavailable?: boolean;
  'aria-describedby'?: string | undefined;
  onClick?: () => void;
  children: ComponentChildren;
}

/**
 * A button that keeps the keyboard focus while it cannot be used. It is `aria-disabled`, never
 * `disabled`: a disabled button drops the focus to the start of the page, where a keyboard or
 * screen-reader user loses their place; this one stays focused, and the status or alert that
 * follows is read out from its live region.
 */
export function Button({ type, busy = false, unavailable = false, onClick, children, ...rest }: ButtonProps) {
  const off = busy || unavailable;
  return (
    <button
      {...rest}
      type={type}
      aria-disabled={off ? 'true' : undefined}
      aria-busy={busy ? 'true' : undefined}
      onClick={(event) => {
        // Also stops the form's submission, which Enter in one of its fields asks for by a click here.
        if (off) event.preventDefault();
        else onClick?.();
      }}
    >
      {children}
    </button>
  );
}
