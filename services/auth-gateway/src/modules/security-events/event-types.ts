import { named } from '@tessera/contracts';
import { Type } from 'typebox';

/** Every kind of security event, in one closed list: the recorder takes only these, the API documents them. */
const SECURITY_EVENT_TYPES = [
  'sign_in',
  'sign_in_failed',
  'code_locked',
  'rate_limited',
  'refresh_reuse',
  'session_revoked',
  'logout',
  'username_changed',
  'profile_updated',
  'policy_accepted',
  'consent_withdrawn',
  'deletion_requested',
  'deletion_cancelled',
  'deletion_finalized',
] as const;

export type SecurityEventType = (typeof SECURITY_EVENT_TYPES)[number];

export const SecurityEventTypeSchema = named(
  'SecurityEventType',
  Type.Enum(SECURITY_EVENT_TYPES, {
    description: [
      'sign_in: a code was accepted and a session started',
      'sign_in_failed: a wrong code was entered for this account',
      'code_locked: sign-in was locked after too many wrong codes (of one code, the email or the client IP)',
      'rate_limited: requests for this account were refused by a limit',
      'refresh_reuse: a refresh token was used twice; its session was ended',
      'session_revoked: a session was ended by revoke-token or "sign out that device"',
      'logout: every session was ended',
      'username_changed, profile_updated: the username or other fields of the profile changed',
      'policy_accepted, consent_withdrawn: a policy (privacy policy, terms of use, consent form) was accepted, or consent withdrawn',
      'deletion_requested, deletion_cancelled, deletion_finalized: the account deletion lifecycle',
    ].join('; '),
  }),
);
