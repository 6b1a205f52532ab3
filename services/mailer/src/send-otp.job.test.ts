import { describe, expect, it } from 'vitest';
import { composeOtpEmail } from './send-otp.job.ts';

const now = new Date('2026-03-01T12:00:00.000Z');
const expiringIn = (seconds: number) => new Date(now.getTime() + seconds * 1000).toISOString();

describe('composeOtpEmail', () => {
  it('puts the code first in the subject and in both bodies, with the product it signs in to', () => {
    const email = composeOtpEmail(
      { to: 'alice@example.com', code: '4826', expiresAt: expiringIn(300) },
      now,
      'Acme',
    );
    expect(email.to).toBe('alice@example.com');
    expect(email.subject).toBe('4826 is your Acme sign-in code');
    expect(email.text).toMatch(/^Your Acme sign-in code is 4826\n/);
    expect(email.html).toMatch(/<p[^>]*>4826<\/p>/);
    // Read on a phone at the phone's width.
    expect(email.html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    for (const body of [email.text, email.html])
      expect(body).toContain('nobody from Acme will ever ask you for it');
  });

  it('tells how long the code stays valid, in whole minutes, and the minute it no longer works', () => {
    const validity = (seconds: number) =>
      composeOtpEmail({ to: 'a@example.com', code: '4826', expiresAt: expiringIn(seconds) }, now, 'Acme')
        .text;
    expect(validity(300)).toContain('It expires in 5 minutes, before 12:05 UTC.');
    // A few seconds in the queue do not make a fresh code's 5 minutes 4; the time is never past its end.
    expect(validity(296)).toContain('It expires in 5 minutes, before 12:05 UTC.');
    expect(validity(290)).toContain('It expires in 4 minutes, before 12:05 UTC.');
    expect(validity(150)).toContain('It expires in 2 minutes, before 12:03 UTC.');
    expect(validity(60)).toContain('It expires in 1 minute, before 12:01 UTC.');
    // Never "0 minutes" for a code that still works.
    expect(validity(30)).toContain('It expires in less than a minute, before 12:01 UTC.');
  });

  it('writes a sender name that means something in HTML as text', () => {
    const email = composeOtpEmail(
      { to: 'a@example.com', code: '4826', expiresAt: expiringIn(300) },
      now,
      'Smith & <Sons>',
    );
    expect(email.html).toContain('Your Smith &amp; &lt;Sons&gt; sign-in code is');
    expect(email.html).not.toContain('<Sons>');
  });
});
