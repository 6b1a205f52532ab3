/** The profile fields the console edits, in the order of the form. */
export const PROFILE_LABELS = {
  name: 'Name',
  surname: 'Surname',
  username: 'Username',
  bio: 'Bio',
  timezone: 'Time zone',
  availabilityStatus: 'Availability',
  instagram: 'Instagram',
  x: 'X',
  tiktok: 'TikTok',
  snapchat: 'Snapchat',
  facebook: 'Facebook',
} as const;

export type ProfileField = keyof typeof PROFILE_LABELS;
export const SOCIAL_FIELDS = ['instagram', 'x', 'tiktok', 'snapchat', 'facebook'] as const;

/** What the form shows: text for every field, '' for an unset one. */
export type ProfileForm = Record<ProfileField, string>;
/** What the API holds for those fields. */
export type ProfileValues = Record<ProfileField, string | null>;

export function profileForm(user: ProfileValues): ProfileForm {
  const form = {} as ProfileForm;
  for (const field of Object.keys(PROFILE_LABELS) as ProfileField[]) form[field] = user[field] ?? '';
  return form;
}

/** How the API will store a value, so that an unchanged field is not sent (and not recorded as changed). */
function normalize(field: ProfileField, text: string): string | null {
  let value = text.trim();
  if ((SOCIAL_FIELDS as readonly string[]).includes(field) && value.startsWith('@')) value = value.slice(1);
  if (field === 'username') value = value.toLowerCase();
  return value === '' ? null : value;
}

/**
 * The `PATCH /users/me` body for what the person changed: only changed fields, trimmed, an emptied
 * field as null (the API clears it, or says why it cannot).
 */
export function profilePatch(user: ProfileValues, form: ProfileForm): Partial<ProfileValues> {
  const patch: Partial<ProfileValues> = {};
  for (const field of Object.keys(PROFILE_LABELS) as ProfileField[]) {
    const value = normalize(field, form[field]);
    if (value === normalize(field, user[field] ?? '')) continue;
    patch[field] = value === null ? null : form[field].trim();
  }
  return patch;
}

/**
 * The form moved from the account as it was (`from`) to the account as it is now (`to`), changed
 * elsewhere meanwhile: a field not edited here shows the new value, one edited here keeps the edit.
 */
export function rebased(form: ProfileForm, from: ProfileValues, to: ProfileValues): ProfileForm {
  const before = profileForm(from);
  const after = profileForm(to);
  const next = { ...form };
  for (const field of Object.keys(PROFILE_LABELS) as ProfileField[])
    if (form[field] === before[field]) next[field] = after[field];
  return next;
}
