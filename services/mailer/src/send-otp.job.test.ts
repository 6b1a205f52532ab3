import { parseMailJobKeys, sealCode } from '@tessera/contracts';
import { UnrecoverableError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { recordingTransport } from '../test/recording-transport.ts';
import { composeOtpEmail, sendOtp } from './send-otp.job.ts';

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
    expect(email.text).toMatch(/^Your Acme sign-in code is:\n\n4826\n\n/);
    expect(email.html).toMatch(/<p[^>]*>4826<\/p>/);
    // Read on a phone at the phone's width.
    expect(email.html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    for (const body of [email.text, email.html])
      expect(body).toContain('nobody from Acme will ever ask you for it');
  });

  it("tells how long the code stays valid, in whole minutes, and the clock's minute, never past its end", () => {
    const validity = (seconds: number) =>
      composeOtpEmail({ to: 'a@example.com', code: '4826', expiresAt: expiringIn(seconds) }, now, 'Acme')
        .text;
    expect(validity(300)).toContain('It expires in 5 minutes, at 12:05 UTC.');
    // A few seconds in the queue do not make a fresh code's 5 minutes 4; the time is never past its end
    // (at 12:04:56, "12:05" would promise a code that no longer works at 12:04:58).
    expect(validity(296)).toContain('It expires in 5 minutes, at 12:04 UTC.');
    expect(validity(290)).toContain('It expires in 4 minutes, at 12:04 UTC.');
    expect(validity(150)).toContain('It expires in 2 minutes, at 12:02 UTC.');
    expect(validity(60)).toContain('It expires in 1 minute, at 12:01 UTC.');
    // Never "0 minutes" for a code that still works.
    expect(validity(30)).toContain('It expires in less than a minute, at 12:00 UTC.');
  });

  it('says where the code may be typed, only where the reader is signing in, and that another code ends it', () => {
    const email = composeOtpEmail(
      { to: 'a@example.com', code: '4826', expiresAt: expiringIn(300) },
      now,
      'Acme',
    );
    for (const body of [email.text, email.html]) {
      expect(body).toContain('Type it only where you are signing in to Acme, and never share it');
      // A reader with two emails uses the newest.
      expect(body).toContain('at 12:05 UTC. If you ask for another code, this one stops working.');
    }
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

describe('sendOtp', () => {
  it('sends nothing for a seal that opens to anything but four digits, and does not retry it', async () => {
    const keys = parseMailJobKeys();
    const { transport, sent } = recordingTransport();
    const to = 'a@example.com';
    for (const code of ['<a href="https://evil.example">4826</a>', '48261', '']) {
      const data = { to, sealedCode: sealCode(code, to, keys), expiresAt: expiringIn(300) };
      await expect(
        sendOtp(data, transport, { messageKey: 'send-otp-1:0', now, keys, product: 'Acme' }),
      ).rejects.toBeInstanceOf(UnrecoverableError);
    }
    expect(sent).toEqual([]);
  });
});
