import { parseMailJobKeys } from '@tessera/contracts';
import { describe, expect, it } from 'vitest';
import { recordingTransport } from '../test/recording-transport.ts';
import {
  composeDeletionCancelledEmail,
  composeDeletionScheduledEmail,
  sendDeletionScheduled,
} from './deletion-email.job.ts';

const SCHEDULED_FOR = '2026-12-22T09:05:00.000Z';

describe('composeDeletionScheduledEmail', () => {
  const now = new Date('2026-11-22T09:05:00.000Z');
  const email = composeDeletionScheduledEmail(
    { to: 'alice@example.com', scheduledFor: SCHEDULED_FOR },
    now,
    'Acme',
  );

  it('tells the date, in the subject and both bodies, addressed to the account', () => {
    expect(email.to).toBe('alice@example.com');
    expect(email.subject).toBe('Your Acme account will be deleted on 22 December 2026 at 09:05 UTC');
    expect(email.text).toContain('scheduled for deletion on 22 December 2026 at 09:05 UTC.');
    expect(email.html).toContain('scheduled for deletion on 22 December 2026 at 09:05 UTC.');
  });

  it('says that signing in and cancelling keeps the account, by a day that is in time in every time zone', () => {
    // 22 December at 09:05 UTC is 21 December at 21:05 in UTC−12: by the end of 20 December anywhere.
    for (const body of [email.text, email.html])
      expect(body).toContain(
        'Sign in and cancel the deletion by 20 December 2026 wherever you are, and your account stays as it is.',
      );
    const late = composeDeletionScheduledEmail(
      { to: 'alice@example.com', scheduledFor: '2026-12-22T23:30:00.000Z' },
      now,
      'Acme',
    );
    // 22 December at 11:30 in UTC−12: the end of 21 December is in time everywhere.
    expect(late.text).toContain('cancel the deletion by 21 December 2026 wherever you are');
    // A grace period of hours: no such day is ahead, and no date past is named.
    const soon = composeDeletionScheduledEmail(
      { to: 'alice@example.com', scheduledFor: '2026-11-22T11:05:00.000Z' },
      now,
      'Acme',
    );
    expect(soon.text).toContain(
      'Sign in and cancel the deletion before then, and your account stays as it is.',
    );
    // 20 December is over in UTC+14 from 20 December at 10:00 UTC on: no day is named after that.
    const at = (iso: string) =>
      composeDeletionScheduledEmail(
        { to: 'alice@example.com', scheduledFor: SCHEDULED_FOR },
        new Date(iso),
        'Acme',
      ).text;
    expect(at('2026-12-20T09:59:00.000Z')).toContain(
      'cancel the deletion by 20 December 2026 wherever you are',
    );
    expect(at('2026-12-20T10:00:00.000Z')).toContain('cancel the deletion before then');
  });

  it('says where to sign in when MAIL_ACCOUNT_URL gives the account page, a link in the HTML', () => {
    const page = 'https://auth.acme.example/account/?from=email&lang=en';
    const linked = composeDeletionScheduledEmail(
      { to: 'alice@example.com', scheduledFor: SCHEDULED_FOR },
      now,
      'Acme',
      page,
    );
    expect(linked.text).toContain(
      `Changed your mind? Sign in at ${page} and cancel the deletion by 20 December 2026 wherever you are, and your account stays as it is.`,
    );
    const href = 'https://auth.acme.example/account/?from=email&amp;lang=en';
    expect(linked.html).toContain(
      `Changed your mind? Sign in at <a href="${href}" style="color:#0b57d0">${href}</a> and cancel the deletion`,
    );
    expect(linked.html.match(/<a /g)).toHaveLength(1);
    // Without it, the email names no place, and links nowhere.
    expect(email.text).not.toContain('http');
    expect(email.html).not.toContain('<a ');
  });

  it('holds no other number than those of the dates (no code, no token)', () => {
    const html = email.html.replace(/<head>.*<\/head>/, '').replaceAll(/style="[^"]*"/g, '');
    for (const body of [email.text, html])
      expect(new Set(body.match(/\d+/g))).toEqual(new Set(['22', '2026', '09', '05', '20']));
    expect(new Set(email.subject.match(/\d+/g))).toEqual(new Set(['22', '2026', '09', '05']));
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
      'Your Smith & Sons account will not be deleted: its deletion was cancelled on 30 November 2026 at 18:30 UTC.',
    );
    expect(email.html).toContain('Your Smith &amp; Sons account will not be deleted');
    expect(email.text).toContain('Your account stays as it is');
    expect(email.html).toContain('cancelled on 30 November 2026 at 18:30 UTC.');
    expect(email.text).toContain(
      'If you did not cancel it, sign in and sign out the devices you do not recognise.',
    );
  });

  it('says where to sign in when MAIL_ACCOUNT_URL gives the account page', () => {
    const page = 'https://auth.acme.example/account/';
    const email = composeDeletionCancelledEmail(
      { to: 'alice@example.com', cancelledAt: '2026-11-30T18:30:00.000Z' },
      'Acme',
      page,
    );
    expect(email.text).toContain(
      `If you did not cancel it, sign in at ${page} and sign out the devices you do not recognise.`,
    );
    expect(email.html).toContain(
      `sign in at <a href="${page}" style="color:#0b57d0">${page}</a> and sign out`,
    );
  });
});

describe('sendDeletionScheduled', () => {
  const { transport, sent } = recordingTransport();

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
