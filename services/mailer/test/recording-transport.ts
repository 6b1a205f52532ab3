import type { Email } from '../src/mime.ts';
import type { MailTransport } from '../src/transport.ts';

/** A transport that keeps every email it is handed, in `sent`, for tests that read what went out. */
export function recordingTransport(): { transport: MailTransport; sent: Email[] } {
  const sent: Email[] = [];
  const transport: MailTransport = {
    delivery: 'outbox',
    send: async (email) => {
      sent.push(email);
    },
    verify: async () => {},
    close: () => {},
  };
  return { transport, sent };
}
