import { describe, expect, it } from 'vitest';
import { isAboutCode, isAboutEmail, sendCodeFailure, verifyCodeFailure } from './sign-in-failures.ts';

const failure = (status: number, messages: string[], retryAfter?: number) => ({
  status,
  messages,
  retryAfter,
});

describe('sign-in failures', () => {
  it('lets a wrong code be retried and says what to do about a spent one', () => {
    expect(verifyCodeFailure(failure(400, ['Validation failed', 'Invalid code']))).toMatch(
      /not right.*try again/,
    );
    const wrong = (left: string) =>
      verifyCodeFailure(
        failure(400, ['Validation failed', 'Invalid code', `${left} attempt(s) left for this code`]),
      );
    expect(wrong('4')).toBe(
      'That code is not right. Check the newest email, the only code that works, and try again (4 tries left).',
    );
    expect(wrong('1')).toBe(
      'That code is not right. Check the newest email, the only code that works, and try again (one try left).',
    );
    expect(
      verifyCodeFailure(
        failure(400, ['Validation failed', 'Invalid code', 'The code is now locked; request a new one']),
      ),
    ).toMatch(/not right.*no longer works.*Send a new code/);
    expect(
      verifyCodeFailure(
        failure(400, [
          'Validation failed',
          'Invalid code',
          'Too many wrong codes for this email: no code is accepted for 86280 seconds',
        ]),
      ),
    ).toBe(
      'That code is not right, and this email has had too many wrong codes. Try again in 23 hours 58 minutes.',
    );
    expect(verifyCodeFailure(failure(404, ['Resource not found']))).toMatch(/Send a new code/);
    expect(verifyCodeFailure(failure(409, ['Resource already exists']))).toMatch(/Send a new code/);
  });

  it('says when to try again after too many attempts', () => {
    expect(verifyCodeFailure(failure(429, ['Too many requests'], 3000))).toBe(
      'Too many wrong codes. Try again in 50 minutes.',
    );
    expect(
      sendCodeFailure(failure(429, ['Too many requests', 'A code was sent to this email moments ago'], 59)),
    ).toBe('A code was sent to this email moments ago. Try again in 59 seconds.');
  });

  it('asks for a valid email when the API refuses the address', () => {
    expect(sendCodeFailure(failure(400, ['Validation failed', 'body.email must match format "email"']))).toBe(
      'Enter a valid email address, such as name@example.com.',
    );
  });

  it('says how long an address may be when the API refuses a longer one', () => {
    expect(
      sendCodeFailure(
        failure(400, ['Validation failed', 'body.email must NOT have more than 254 characters']),
      ),
    ).toBe('This email address has more than 254 characters.');
  });

  it('says why the API refuses an address that no mail could reach', () => {
    expect(
      sendCodeFailure(
        failure(400, ['Validation failed', 'body.email has more than 64 characters before the @']),
      ),
    ).toBe('This email address has more than 64 characters before the @.');
    expect(
      sendCodeFailure(
        failure(400, [
          'Validation failed',
          'body.email is in the .invalid domain, which never receives mail',
        ]),
      ),
    ).toBe('This email address is in the .invalid domain, which never receives mail.');
  });

  it('blames the email or the code typed only for failures about them, not for an outage or a limit', () => {
    expect(isAboutEmail(failure(400, ['Validation failed', 'body.email must match format "email"']))).toBe(
      true,
    );
    for (const status of [400, 404, 409]) expect(isAboutCode(failure(status, ['Refused']))).toBe(true);
    const network = { ...failure(0, ['Network error']), isNetworkError: true };
    for (const other of [
      failure(503, ['Service unavailable']),
      failure(500, ['Error']),
      failure(429, ['Too many requests'], 60),
      network,
    ]) {
      expect(isAboutEmail(other)).toBe(false);
      expect(isAboutCode(other)).toBe(false);
    }
    expect(isAboutCode(new Error('bug'))).toBe(false);
  });
});
