import type { Session } from '@tessera/client';
import { deviceName } from '../device-name.ts';
import { formatDateTime } from '../format.ts';

/**
 * What each session's "Sign out" says of it, for a list of buttons or a voice control to tell them
 * apart: its device, and since when; sessions alike in both (two sign-ins of one browser in one
 * minute) are counted, "2 of 2".
 */
export function sessionLabels(sessions: readonly Session[]): Map<string, string> {
  const described = sessions.map(
    (session) =>
      [
        session._id,
        `${deviceName(session.userAgent)}, signed in ${formatDateTime(session.createdAt)}`,
      ] as const,
  );
  const alike = (text: string) => described.filter(([, other]) => other === text).length;
  const seen = new Map<string, number>();
  return new Map(
    described.map(([id, text]) => {
      const count = alike(text);
      if (count === 1) return [id, text];
      const nth = (seen.get(text) ?? 0) + 1;
      seen.set(text, nth);
      return [id, `${text}, ${nth} of ${count}`];
    }),
  );
}
