import { failureText, isFailure, retryText, sentence } from '../failure-text.ts';

// A failure is the field's own error (shown with it, the field marked invalid) only when it is about
// what was typed. An outage, no network or a limit is not: it is said for the form, and the email
// or code, which may well be right, is not marked wrong.

/** Whether a refused send is about the address typed. */
export const isAboutEmail = (error: unknown): boolean => isFailure(error) && error.status === 400;

/** Whether a refused sign-in is about the code typed: wrong (400), expired or used (404), locked (409). */
export const isAboutCode = (error: unknown): boolean =>
  isFailure(error) && [400, 404, 409].includes(error.status);

/** Why no code was sent, for a person. */
export function sendCodeFailure(error: unknown): string {
  if (!isFailure(error) || error.status !== 400) return failureText(error);
  // An address of the right form that no mail could reach: the API says why ("body.email has more
  // than 64 characters before the @"); a malformed one gets the example.
  const reason = error.messages.find((text) => /^body\.email (has|is|must end) /.test(text));
  if (reason !== undefined) return sentence(reason.replace(/^body\.email/, 'This email address'));
  for (const text of error.messages) {
    const limit = /^body\.email must NOT have more than (\d+) characters/.exec(text)?.[1];
    if (limit !== undefined) return `This email address has more than ${limit} characters.`;
  }
  return 'Enter a valid email address, such as name@example.com.';
}

/** Why the code was not accepted, and what to do next. */
export function verifyCodeFailure(error: unknown): string {
  if (!isFailure(error)) return failureText(error);
  switch (error.status) {
    case 400: {
      // The API says how many wrong codes this code still takes ("4 attempt(s) left for this code"),
      // that this one was its last ("The code is now locked; request a new one"), or that the email
      // takes no code for a while ("… no code is accepted for 86399 seconds"). A code sent again
      // replaces the one before: a person holding two emails may have typed the older one.
      const details = error.messages.join('\n');
      const wait = /no code is accepted for (\d+) seconds/.exec(details)?.[1];
      if (wait !== undefined)
        return `That code is not right, and this email has had too many wrong codes. ${retryText({ ...error, retryAfter: Number(wait) })}`;
      if (/now locked/.test(details))
        return 'That code is not right, and after so many tries this code no longer works. Send a new code.';
      const left = /^(\d+) attempt/m.exec(details)?.[1];
      const tries = left === undefined ? '' : ` (${left === '1' ? 'one try' : `${left} tries`} left)`;
      return `That code is not right. Check the newest email, the only code that works, and try again${tries}.`;
    }
    case 404:
      return 'This code has expired or was already used. Send a new code.';
    case 409:
      return 'Too many wrong codes: this code no longer works. Send a new code.';
    case 429:
      return `Too many wrong codes. ${retryText(error)}`;
    default:
      return failureText(error);
  }
}
