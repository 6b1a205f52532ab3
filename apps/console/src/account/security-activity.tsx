import type { SecurityEvent } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Button } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { deviceName } from '../device-name.ts';
import { failureText } from '../failure-text.ts';
import { useFocusFallback } from '../focus-fallback.ts';
import { formatDateTime } from '../format.ts';
import { securityEventText } from './security-event-text.ts';

const PAGE_SIZE = 10;

/** The account's security events, newest first, a page at a time. */
export function SecurityActivity({ refreshKey }: { refreshKey: number }) {
  const { tessera, sessionEnded } = useConsole();
  const [events, setEvents] = useState<SecurityEvent[] | null>(null);
  const [page, setPage] = useState(1);
  const [hasMore, setHasMore] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  /** How many events "Show more" has brought in view, said to screen readers: the list grows silently. */
  const [shown, setShown] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  const keepFocus = useFocusFallback(heading);
  // Bumped by every reload: a page that arrives after a newer reload began is dropped, not added.
  const generation = useRef(0);

  /**
   * Adds page `pageNumber` to `keep` ("Show more"). A reload (`keep` empty) asks for pages 1 to
   * `pageNumber` in one request: it keeps in view what "Show more" brought.
   */
  async function load(pageNumber: number, keep: SecurityEvent[]) {
    const mine = generation.current;
    const reload = keep.length === 0;
    // The API gives at most 100 events a page.
    const pages = reload ? Math.min(pageNumber, 100 / PAGE_SIZE) : 1;
    setBusy(true);
    try {
      const { list, pagination } = await tessera.securityEvents.list(
        reload ? { page: 1, limit: pages * PAGE_SIZE } : { page: pageNumber, limit: PAGE_SIZE },
      );
      if (mine !== generation.current) return;
      // The last page takes "Show more", and the focus on it, away; a reload may too.
      keepFocus();
      const seen = new Set(keep.map((event) => event._id));
      const all = [...keep, ...list.filter((event) => !seen.has(event._id))];
      setEvents(all);
      setPage(reload ? pages : pageNumber);
      setHasMore(pagination.hasNextPage);
      setError(undefined);
      if (reload) setShown('');
      else setShown(`Showing ${all.length} of ${Math.max(all.length, pagination.totalItems)} events.`);
    } catch (failure) {
      if (mine === generation.current && !sessionEnded(failure)) setError(failureText(failure));
    } finally {
      if (mine === generation.current) setBusy(false);
    }
  }

  useEffect(() => {
    generation.current += 1;
    void load(page, []);
  }, [refreshKey]);

  return (
    <section class="card" aria-labelledby="activity-heading">
      <h2 id="activity-heading" ref={heading} tabIndex={-1}>
        Security activity
      </h2>
      {events === null && !error && <p>Loading activity…</p>}
      {events?.length === 0 && <p class="muted">Nothing yet.</p>}
      {events && events.length > 0 && (
        // biome-ignore lint/a11y/noRedundantRoles: VoiceOver on Safari drops the role of a list without bullets
        <ul class="items" role="list">
          {events.map((event) => (
            <li key={event._id}>
              <div class="item-main">
                <p class="item-title">{securityEventText(event.type)}</p>
                <p class="item-meta">
                  <time dateTime={event.createdAt}>{formatDateTime(event.createdAt)}</time>
                  {event.userAgent && ` · ${deviceName(event.userAgent)}`}
                  {event.ipAddress && ` · IP ${event.ipAddress}`}
                </p>
              </div>
            </li>
          ))}
        </ul>
      )}
      {error && (
        <p class="alert" role="alert">
          {error}
        </p>
      )}
      <p role="status" class="visually-hidden">
        {shown}
      </p>
      {hasMore && (
        <div class="actions">
          <Button
            type="button"
            class="secondary"
            busy={busy}
            onClick={() => void load(page + 1, events ?? [])}
          >
            Show more
          </Button>
        </div>
      )}
    </section>
  );
}
