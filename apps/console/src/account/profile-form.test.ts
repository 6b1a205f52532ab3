import { describe, expect, it } from 'vitest';
import { type ProfileValues, profileForm, profilePatch, rebased } from './profile-form.ts';

const user: ProfileValues = {
  name: 'Ada',
  surname: 'Lovelace',
  username: 'ada.l',
  bio: null,
  timezone: 'Europe/London',
  availabilityStatus: null,
  instagram: 'ada_l',
  x: null,
  tiktok: null,
  snapchat: null,
  facebook: null,
};

describe('profile form', () => {
  it('shows unset fields as empty text', () => {
    expect(profileForm(user)).toMatchObject({ name: 'Ada', bio: '', x: '', timezone: 'Europe/London' });
  });

  it('sends only what changed, trimmed, and null for an emptied field', () => {
    const form = { ...profileForm(user), bio: '  Engines and poetry ', timezone: '', x: '@ada' };
    expect(profilePatch(user, form)).toEqual({ bio: 'Engines and poetry', timezone: null, x: '@ada' });
  });

  it('does not send a value the API would store unchanged', () => {
    const form = { ...profileForm(user), username: 'Ada.L', instagram: '@ada_l', name: ' Ada ' };
    expect(profilePatch(user, form)).toEqual({});
  });

  it('follows a change made elsewhere in the fields not edited here, and keeps the edits', () => {
    const form = { ...profileForm(user), bio: 'Written here' };
    const elsewhere = { ...user, name: 'Augusta', bio: 'Written there' };
    const next = rebased(form, user, elsewhere);
    expect(next).toMatchObject({ name: 'Augusta', bio: 'Written here', surname: 'Lovelace' });
    expect(profilePatch(elsewhere, next)).toEqual({ bio: 'Written here' });
  });
});
