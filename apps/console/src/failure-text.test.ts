import { describe, expect, it } from 'vitest';
import { failureText, fieldProblems, sentence } from './failure-text.ts';

const reader = { locale: 'en-US', timeZone: 'UTC' };
const failure = (status: number, messages: string[], retryAfter?: number) => ({
  status,
  messages,
  retryAfter,
});

describe('failureText', () => {
  it('says when to try again after a 429', () => {
    const error = failure(429, ['Too many requests', 'A code was sent to this email moments ago'], 42);
    expect(failureText(error)).toBe('A code was sent to this email moments ago. Try again in 42 seconds.');
    const twice = failure(
      429,
      ['Too many requests', 'Too many codes were requested', 'Try again in 3600 seconds'],
      3600,
    );
    expect(failureText(twice)).toBe('Too many codes were requested. Try again in 1 hour.');
    expect(failureText(failure(429, ['Too many requests'], 3600))).toBe(
      'Too many requests. Try again in 1 hour.',
    );
  });

  it('tells a network failure and a server failure apart, without internals', () => {
    expect(failureText({ ...failure(0, []), isNetworkError: true })).toMatch(/Cannot reach the server/);
    expect(failureText(failure(503, ['Service unavailable']))).toMatch(/unavailable right now/);
    expect(failureText(failure(500, ['Internal server error', 'boom']))).toMatch(/on our side/);
    expect(failureText(new Error('TypeError: x is undefined'))).toMatch(/Something went wrong/);
  });

  it('uses the details, as sentences with readable times', () => {
    expect(
      failureText(failure(409, ['Resource already exists', 'No deletion of this account is scheduled'])),
    ).toBe('No deletion of this account is scheduled.');
    expect(sentence('username can be changed again at 2026-12-22T10:00:00.000Z', reader)).toBe(
      'Username can be changed again at Dec 22, 2026, 10:00 AM.',
    );
  });
});

describe('fieldProblems', () => {
  const labels = { name: 'Name', username: 'Username', x: 'X', bio: 'Bio' };

  it('puts each detail next to the field it names, with the label people see', () => {
    const error = failure(400, [
      'Validation failed',
      'username must be 3–30 characters',
      'bio must be at most 500 characters',
      'x must be a handle such as ayse.yilmaz, not a URL',
      'nmae is not a field',
    ]);
    expect(fieldProblems(error, labels, reader)).toEqual({
      byField: {
        username: 'Username must be 3–30 characters.',
        bio: 'Bio must be at most 500 characters.',
        x: 'X must be a handle such as ayse.yilmaz, not a URL.',
      },
      other: ['Nmae is not a field.'],
    });
  });

  it('does not take a longer field name for a shorter one', () => {
    const error = failure(400, ['Validation failed', 'xyz must be short']);
    expect(fieldProblems(error, labels).byField).toEqual({});
  });

  it('reads a taken username', () => {
    const error = failure(409, ['Resource already exists', 'username is taken']);
    expect(fieldProblems(error, labels).byField).toEqual({ username: 'Username is taken.' });
  });
});
