import { describe, expect, it } from 'vitest';
import { composeOtpEmail } from './send-otp.job.ts';

const now = new Date('2026-03-01T12:00:00.000Z');
const expiringIn = (seconds: number) => new Date(now.getTime() + seconds * 1000).toISOString();

describe('composeOtpEmail', () => {
  it('puts the code in the subject and in both bodies, addressed to the recipient', () => {
    const email = composeOtpEmail({ to: 'alice@example.com', code: '4826', expiresAt: expiringIn(300) }, now);
    expect(email.to).toBe('alice@example.com');
    expect(email.subject).toBe('4826 is your sign-in code');
    expect(email.text).toContain('Your sign-in code is 4826');
    expect(email.html).toMatch(/<p[^>]*>4826<\/p>/);
  });

  it('tells how long the code stays valid, in whole minutes', () => {
    const validity = (seconds: number) =>
      composeOtpEmail({ to: 'a@example.com', code: '4826', expiresAt: expiringIn(seconds) }, now).text;
    expect(validity(300)).toContain('It expires in 5 minutes.');
    expect(validity(299)).toContain('It expires in 5 minutes.');
    expect(validity(60)).toContain('It expires in 1 minute.');
    // Never "0 minutes" for a code that still works.
    expect(validity(10)).toContain('It expires in 1 minute.');
  });
});
