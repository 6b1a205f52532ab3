import { parseMailJobKeys } from '@tessera/contracts';
import { describe, expect, it } from 'vitest';
import {
  composeDeletionCancelledEmail,
  composeDeletionScheduledEmail,
  sendDeletionScheduled,
} from './deletion-email.job.ts';
import type { Email } from './mime.ts';
import type { MailTransport } from './transport.ts';

const SCHEDULED_FOR = '2026-12-22T09:05:00.000Z';

describe('composeDeletionScheduledEmail', () => {
  const email = composeDeletionScheduledEmail(
    { to: 'alice@example.com', scheduledFor: SCHEDULED_FOR },
    'Acme',
  );

  it('tells the date, in the subject and both bodies, addressed to the account', () => {
    expect(email.to).toBe('alice@example.com');
    expect(email.subject).toBe('Your Acme account will be deleted on 22 December 2026 at 09:05 UTC');
    expect(email.text).toContain('scheduled for deletion on 22 December 2026 at 09:05 UTC.');
    expect(email.html).toContain('scheduled for deletion on 22 December 2026 at 09:05 UTC.');
  });

  it('says that signing in and cancelling keeps the account', () => {
    for (const body of [email.text, email.html])
      expect(body).toContain('Sign in and cancel the deletion before then, and your account stays as it is.');
  });

  it('holds no other number than those of the date (no code, no token)', () => {
    const html = email.html.replace(/<head>.*<\/head>/, '').replaceAll(/style="[^"]*"/g, '');
    for (const body of [email.subject, email.text, html])
      expect(new Set(body.match(/\d+/g))).toEqual(new Set(['22', '2026', '09', '05']));
  });
});

describe('composeDeletionCancelledEmail', () => {
  it('confirms the cancellation and when it happened', () => {
    const email = composeDeletionCancelledEmail(
      { to: 'alice@example.com', cancelledAt: '2026-11-30T18:30:00.000Z' },
      'Smith & Sons',
    );
    expect(email.to).toBe('alice@example.com');
    expect(email.subject).toBe('Your Smith & Sons account will not be deleted');
    expect(email.text).toContain(
      'The deletion of your Smith & Sons account was cancelled on 30 November 2026 at 18:30 UTC.',
    );
    expect(email.html).toContain('The deletion of your Smith &amp; Sons account');
    expect(email.text).toContain('Your account stays as it is');
    expect(email.html).toContain('cancelled on 30 November 2026 at 18:30 UTC.');
  });
});

describe('sendDeletionScheduled', () => {
  const sent: Email[] = [];
  const transport: MailTransport = {
    delivery: 'outbox',
    send: async (email) => {
      sent.push(email);
    },
    verify: async () => {},
    close: () => {},
  };

  it('sends before the date and skips once it has passed (the account is gone by then)', async () => {
    const data = { to: 'alice@example.com', scheduledFor: SCHEDULED_FOR };
    const at = (now: string) => ({
      messageKey: 'deletion-scheduled-1:1764000000000',
      now: new Date(now),
      keys: parseMailJobKeys(),
      product: 'Tessera',
    });
    expect(await sendDeletionScheduled(data, transport, at('2026-11-22T09:05:00.000Z'))).toEqual({
      sent: true,
    });
    expect(await sendDeletionScheduled(data, transport, at(SCHEDULED_FOR))).toEqual({ skipped: 'expired' });
    expect(sent).toHaveLength(1);
  });
});
