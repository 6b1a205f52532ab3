import type { RefObject } from 'preact';
import { useLayoutEffect, useRef } from 'preact/hooks';

/**
 * Keeps the keyboard focus on the page when a change takes away what held it: a session's sign-out
 * once that session ended (here or elsewhere), "Show more" on the last page, "Delete account" once
 * another tab scheduled the deletion. Call the function it returns just before setting what changed;
 * if that render removed the focused element, the focus goes to `fallback` (a heading) instead of the
 * start of the page, where a keyboard or screen-reader user would lose their place.
 */
export function useFocusFallback(fallback: RefObject<HTMLElement | null>): () => void {
  const focused = useRef<Element | null>(null);
  useLayoutEffect(() => {
    const before = focused.current;
    focused.current = null;
    if (before && !before.isConnected) fallback.current?.focus();
  });
  return () => {
    focused.current = document.activeElement;
  };
}
