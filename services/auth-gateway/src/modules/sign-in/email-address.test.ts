import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mailboxOf, normalizeEmail, undeliverable } from './email-address.ts';

describe('normalizeEmail', () => {
  it.each([
    [' Alice@Example.COM ', 'alice@example.com'],
    ['Ute@Bücher.DE', 'ute@xn--bcher-kva.de'],
    ['ute@xn--bcher-kva.de', 'ute@xn--bcher-kva.de'],
    ['a@ｅｘａｍｐｌｅ.com', 'a@example.com'],
    // Only ASCII letters change case: the Kelvin sign is not a k, and stays to be refused.
    ['\u212Aate@example.com', '\u212Aate@example.com'],
    // Not a domain name at all: left for the format check.
    ['a@exä mple.com', 'a@exä mple.com'],
    ['no-at-sign', 'no-at-sign'],
    // What a URL's host parser would cut at, decode or drop is no part of a domain name: left as written.
    ['victim@gmail.com/ü', 'victim@gmail.com/ü'],
    ['victim@gmail.com?ü', 'victim@gmail.com?ü'],
    ['victim@gmail.com#ü', 'victim@gmail.com#ü'],
    ['victim@gmail.com\\ü', 'victim@gmail.com\\ü'],
    ['victim@example.com/ü.invalid', 'victim@example.com/ü.invalid'],
    ['victim@%67mail.comü', 'victim@%67mail.comü'],
    ['victim@gmail.com\u00ADü', 'victim@gmail.com\u00ADü'],
    ['victim@example.com\tü', 'victim@example.com\tü'],
  ])('%j is %j', (raw, normalized) => {
    expect(normalizeEmail(raw)).toBe(normalized);
  });
});

describe('undeliverable', () => {
  it.each([
    `${'a'.repeat(64)}@example.com`,
    `a@${'b'.repeat(63)}.example.com`,
    'dev@app.test',
    'dev@app.localhost',
    'dev@mail.example',
    'a@123.example.com',
    'a@example.co1',
    'ute@xn--bcher-kva.de',
    'hal@xn--fsqu00a.xn--4rr70v',
  ])('takes %s', (email) => {
    expect(undeliverable(email)).toBeUndefined();
  });

  it.each([
    [`${'a'.repeat(65)}@example.com`, /64 characters before the @/],
    [`a@${'b'.repeat(64)}.com`, /domain label of more than 63/],
    ['a@example.123', /all-numeric top-level domain/],
    ['a@127.0.0.1', /all-numeric top-level domain/],
    ['deleted-0@tombstone.invalid', /\.invalid domain/],
    ['jörg@example.de', /non-ASCII characters before the @ are not supported/],
    ['\u212Aate@example.com', /non-ASCII characters before the @ are not supported/],
    // Not punycode at all, and the form of `bu` + combining diaeresis + `cher`, which no registry takes.
    ['ana@xn--zz.de', /no internationalized name/],
    ['ana@xn--bucher-xyd.de', /no internationalized name/],
    ['ana@mail.xn--.de', /no internationalized name/],
  ])('refuses %s', (email, why) => {
    expect(undeliverable(email)).toMatch(why);
  });
});

describe('mailboxOf', () => {
  it.each([
    ['victim+1@example.net', 'victim@example.net'],
    ['victim+a+b@example.net', 'victim@example.net'],
    ['v.ictim@example.net', 'v.ictim@example.net'],
    ['v.ictim+1@gmail.com', 'victim@gmail.com'],
    ['vic.tim@googlemail.com', 'victim@gmail.com'],
    ['+tag@example.net', '+tag@example.net'],
  ])('%s delivers to %s', (email, mailbox) => {
    expect(mailboxOf(email)).toBe(mailbox);
  });
});

describe('properties', () => {
  const tag = fc.stringMatching(/^[a-z0-9._-]{0,20}$/);
  const untagged = fc
    .emailAddress()
    .map(normalizeEmail)
    .filter((email) => !email.includes('+'));

  it('an address and its +tag variants are one inbox, and an inbox is its own', () => {
    fc.assert(
      fc.property(untagged, tag, (email, suffix) => {
        const at = email.lastIndexOf('@');
        const tagged = `${email.slice(0, at)}+${suffix}${email.slice(at)}`;
        expect(mailboxOf(tagged)).toBe(mailboxOf(email));
        expect(mailboxOf(mailboxOf(email))).toBe(mailboxOf(email));
      }),
    );
  });

  it('normalizing twice changes nothing, and a Unicode domain becomes ASCII whatever its case', () => {
    const label = fc.string({ unit: fc.constantFrom(...'abcxyzäöüéçñå'), minLength: 1, maxLength: 12 });
    const domain = fc.array(label, { minLength: 1, maxLength: 3 }).map((labels) => `${labels.join('.')}.de`);
    fc.assert(
      fc.property(fc.emailAddress(), domain, (email, unicode) => {
        expect(normalizeEmail(normalizeEmail(email))).toBe(normalizeEmail(email));
        const local = email.slice(0, email.lastIndexOf('@'));
        const normalized = normalizeEmail(`${local}@${unicode}`);
        expect(normalized).toMatch(/^[\x20-\x7e]+$/);
        expect(normalizeEmail(`${local.toUpperCase()}@${unicode.toUpperCase()}`)).toBe(normalized);
      }),
    );
  });
});
