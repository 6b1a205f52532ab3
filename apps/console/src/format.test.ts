import { describe, expect, it } from 'vitest';
import {
  displayEmail,
  english,
  formatAgo,
  formatDate,
  formatDateTime,
  formatRelative,
  formatTime,
  formatWait,
} from './format.ts';

const reader = { locale: 'en-US', timeZone: 'UTC' };

describe('formatWait', () => {
  it('says seconds under a minute, and rounds up', () => {
    expect(formatWait(1)).toBe('1 second');
    expect(formatWait(42)).toBe('42 seconds');
    expect(formatWait(0.2)).toBe('1 second');
    expect(formatWait(0)).toBe('1 second');
  });

  it('says minutes and hours, rounded up to the minute', () => {
    expect(formatWait(60)).toBe('1 minute');
    expect(formatWait(61)).toBe('2 minutes');
    expect(formatWait(3599)).toBe('1 hour');
    expect(formatWait(3600)).toBe('1 hour');
    expect(formatWait(3900)).toBe('1 hour 5 minutes');
    expect(formatWait(86_400)).toBe('24 hours');
  });
});

describe('dates', () => {
  it('formats a moment and a day for the reader', () => {
    expect(formatDateTime('2026-11-22T10:00:00.000Z', reader)).toBe('Nov 22, 2026, 10:00 AM');
    expect(formatDateTime('2026-11-22T10:00:00.000Z', { ...reader, timeZone: 'Europe/Istanbul' })).toBe(
      'Nov 22, 2026, 1:00 PM',
    );
    expect(formatDate('2026-12-22T23:30:00.000Z', reader)).toBe('December 22, 2026');
    expect(formatDate('2026-12-22T23:30:00.000Z', { ...reader, timeZone: 'Europe/Istanbul' })).toBe(
      'December 23, 2026',
    );
    expect(formatTime('2026-11-22T16:42:00.000Z', reader)).toBe('4:42 PM');
  });

  it('writes dates in English, as the page is, whatever language the browser asks for first', () => {
    expect(english(['de-DE', 'de'])).toBe('en');
    expect(english(['fr-FR', 'en-GB', 'en'])).toBe('en-GB');
    expect(english([])).toBe('en');
    // What a German browser gets, next to the page's own "just now".
    const inGerman = { locale: english(['de-DE']), timeZone: 'UTC' };
    expect(formatDate('2026-12-27T10:00:00.000Z', inGerman)).toBe('December 27, 2026');
    expect(formatDateTime('2026-12-27T10:00:00.000Z', inGerman)).toBe('Dec 27, 2026, 10:00 AM');
    const now = new Date('2026-11-22T10:00:00.000Z');
    expect(formatRelative('2026-11-22T09:55:00.000Z', now, inGerman)).toBe('5 minutes ago');
  });

  it('says how long ago in the largest unit that fits', () => {
    const now = new Date('2026-11-22T10:00:00.000Z');
    const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000).toISOString();
    expect(formatRelative(ago(10), now, reader)).toBe('just now');
    expect(formatRelative(ago(5 * 60), now, reader)).toBe('5 minutes ago');
    expect(formatRelative(ago(3 * 3600), now, reader)).toBe('3 hours ago');
    expect(formatRelative(ago(26 * 3600), now, reader)).toBe('yesterday');
    expect(formatRelative(ago(70 * 86_400), now, reader)).toBe('2 months ago');
    expect(formatRelative(ago(-2 * 86_400), now, reader)).toBe('in 2 days');
  });

  it("says a use the server stamped after the device's now (its clock behind) happened just now", () => {
    const now = new Date('2026-11-22T10:00:00.000Z');
    const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000).toISOString();
    expect(formatAgo(ago(-2 * 3600), now, reader)).toBe('just now');
    expect(formatAgo(ago(3 * 3600), now, reader)).toBe('3 hours ago');
  });
});

describe('displayEmail', () => {
  it.each([
    ['ute@xn--bcher-kva.de', 'ute@bücher.de'],
    ['hal@xn--fsqu00a.xn--4rr70v', 'hal@例子.广告'],
    ['ivan@xn--d1acpjx3f.xn--p1ai', 'ivan@яндекс.рф'],
    ['ada@example.com', 'ada@example.com'],
    // A Cyrillic а among Latin letters, an emoji, and no punycode at all keep their xn-- form.
    ['ana@xn--exmple-4nf.com', 'ana@xn--exmple-4nf.com'],
    ['ana@xn--ls8h.la', 'ana@xn--ls8h.la'],
    ['ana@xn--zz.de', 'ana@xn--zz.de'],
    // Before the @ nothing is decoded.
    ['xn--bcher-kva@example.com', 'xn--bcher-kva@example.com'],
  ])('shows %s as %s', (email, shown) => {
    expect(displayEmail(email)).toBe(shown);
  });
});
