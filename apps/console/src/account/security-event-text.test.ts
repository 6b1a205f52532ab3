import { describe, expect, it } from 'vitest';
import { securityEventText } from './security-event-text.ts';

describe('securityEventText', () => {
  it('describes the documented types in words', () => {
    expect(securityEventText('sign_in')).toBe('Signed in');
    expect(securityEventText('session_revoked')).toBe('A device was signed out');
    expect(securityEventText('deletion_requested')).toBe('Account deletion requested');
  });

  it('does not call a first username a change: the event is written for both', () => {
    expect(securityEventText('username_changed')).toBe('Username set');
  });

  it('still shows a type added to the API later', () => {
    expect(securityEventText('passkey_added')).toBe('passkey added');
  });
});
