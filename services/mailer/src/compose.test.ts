import { describe, expect, it } from 'vitest';
import { formatDate, senderName } from './compose.ts';

describe('senderName', () => {
  it("is MAIL_FROM's display name, or its domain without one", () => {
    expect(senderName('Acme <no-reply@acme.com>')).toBe('Acme');
    expect(senderName('"Smith & Sons, Ltd" <hello@smith.example>')).toBe('Smith & Sons, Ltd');
    expect(senderName('no-reply@acme.com')).toBe('acme.com');
    expect(senderName('<no-reply@acme.com>')).toBe('acme.com');
  });
});

describe('formatDate', () => {
  it('writes the moment in UTC, day month year and 24-hour time', () => {
    expect(formatDate('2026-12-22T09:05:00.000Z')).toBe('22 December 2026 at 09:05 UTC');
    expect(formatDate('2027-01-01T23:59:59.999Z')).toBe('1 January 2027 at 23:59 UTC');
  });
});
