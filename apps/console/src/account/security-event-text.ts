/** What each kind of security event means, for the person whose account it is. */
const EVENT_TEXT: Record<string, string> = {
  sign_in: 'Signed in',
  sign_in_failed: 'A wrong sign-in code was entered',
  code_locked: 'Sign-in was locked after too many wrong codes',
  rate_limited: 'Requests were refused for a while (too many)',
  refresh_reuse: 'A session was ended because its key was used twice',
  session_revoked: 'A device was signed out',
  logout: 'Signed out everywhere',
  username_changed: 'Username set', // the first time too: the event does not say which
  profile_updated: 'Profile updated',
  policy_accepted: 'A policy was accepted',
  consent_withdrawn: 'Consent withdrawn',
  deletion_requested: 'Account deletion requested',
  deletion_cancelled: 'Account deletion cancelled',
  deletion_finalized: 'Account deleted',
};

/** A sentence for an event type; a type this console does not know yet is shown as it is named. */
export function securityEventText(type: string): string {
  return EVENT_TEXT[type] ?? type.replaceAll('_', ' ');
}
