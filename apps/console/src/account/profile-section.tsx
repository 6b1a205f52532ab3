import type { User, UserPatch } from '@tessera/client';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { Button, useBusy } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { failureText, fieldProblems, isFailure } from '../failure-text.ts';
import { focusFirstProblem, SelectField, TextAreaField, TextField } from '../fields.tsx';
import { MessageText, useMessage } from '../message.tsx';
import {
  PROFILE_LABELS,
  type ProfileField,
  type ProfileForm,
  profileForm,
  profilePatch,
  rebased,
  SOCIAL_FIELDS,
} from './profile-form.ts';

const AVAILABILITY = [
  { value: '', label: 'Not set' },
  { value: 'available', label: 'Available' },
  { value: 'busy', label: 'Busy' },
  { value: 'away', label: 'Away' },
  { value: 'offline', label: 'Offline' },
];

/**
 * Every IANA zone the browser knows, UTC first (browsers list only places), plus the stored one
 * should the browser not know it.
 */
function timeZoneOptions(current: string) {
  const zones = Intl.supportedValuesOf('timeZone').filter((zone) => zone !== 'UTC');
  zones.unshift('UTC');
  if (current && !zones.includes(current)) zones.unshift(current);
  return [
    { value: '', label: 'Not set' },
    ...zones.map((zone) => ({ value: zone, label: zone.replaceAll('_', ' ') })),
  ];
}

export function ProfileSection({ user, onSaved }: { user: User; onSaved: (user: User) => void }) {
  const { tessera, sessionEnded } = useConsole();
  const [form, setForm] = useState<ProfileForm>(() => profileForm(user));
  // The account the form was filled from: a save sends what differs from it. When the account is
  // loaded again (the tab shown again), what was not edited here follows it, and is not sent back.
  const [base, setBase] = useState(user);
  useEffect(() => {
    if (user === base) return;
    setForm((current) => rebased(current, base, user));
    setBase(user);
  }, [user, base]);
  const [problems, setProblems] = useState<Partial<Record<ProfileField, string>>>({});
  const [formError, setFormError] = useState<string | undefined>();
  const [status, setStatus] = useMessage();
  const { busy, run } = useBusy();
  const zones = useMemo(() => timeZoneOptions(form.timezone), [form.timezone]);

  const edit = (field: ProfileField) => (value: string) => {
    setForm((current) => ({ ...current, [field]: value }));
    setProblems(({ [field]: _, ...rest }) => rest);
    setStatus();
  };

  function save(event: Event) {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    void run(() => saveForm(element));
  }

  async function saveForm(element: HTMLFormElement) {
    setFormError(undefined);
    setProblems({});
    setStatus();
    try {
      const patch = profilePatch(base, form);
      if (Object.keys(patch).length > 0) {
        // The API checks every value (and names the field of each problem); the form sends them as typed.
        const updated = await tessera.users.update(patch as UserPatch);
        setForm(profileForm(updated));
        setBase(updated);
        onSaved(updated);
      }
      setStatus('Saved');
    } catch (error) {
      if (sessionEnded(error)) return;
      if (isFailure(error) && (error.status === 400 || error.status === 409)) {
        const { byField, other } = fieldProblems(error, PROFILE_LABELS);
        setProblems(byField);
        if (other.length > 0) setFormError(other.join(' '));
        focusFirstProblem(element);
      } else setFormError(failureText(error));
    }
  }

  const text = (
    field: ProfileField,
    extra: { hint?: string; groupHint?: string; autoComplete?: string } = {},
  ) => (
    <TextField
      id={`profile-${field}`}
      label={PROFILE_LABELS[field]}
      value={form[field]}
      onInput={edit(field)}
      error={problems[field]}
      spellcheck={false}
      {...extra}
    />
  );

  return (
    <section class="card" aria-labelledby="profile-heading">
      <h2 id="profile-heading">Profile</h2>
      <form onSubmit={save} noValidate>
        <div class="fields">
          {text('name', { autoComplete: 'given-name' })}
          {text('surname', { autoComplete: 'family-name' })}
        </div>
        {text('username', {
          autoComplete: 'username',
          hint: 'Letters, digits, dots and underscores. It can be changed only now and then.',
        })}
        <TextAreaField
          id="profile-bio"
          label={PROFILE_LABELS.bio}
          hint="Up to 500 characters."
          value={form.bio}
          onInput={edit('bio')}
          error={problems.bio}
        />
        <div class="fields">
          <SelectField
            id="profile-timezone"
            label={PROFILE_LABELS.timezone}
            value={form.timezone}
            options={zones}
            onChange={edit('timezone')}
            error={problems.timezone}
          />
          <SelectField
            id="profile-availability"
            label={PROFILE_LABELS.availabilityStatus}
            value={form.availabilityStatus}
            options={AVAILABILITY}
            onChange={edit('availabilityStatus')}
            error={problems.availabilityStatus}
          />
        </div>
        <fieldset class="social">
          <legend class="label">Social handles</legend>
          <p id="social-hint" class="hint">
            The handle alone, such as ada.lovelace, not a link.
          </p>
          <div class="fields">{SOCIAL_FIELDS.map((field) => text(field, { groupHint: 'social-hint' }))}</div>
        </fieldset>
        {formError && (
          <p class="alert" role="alert">
            {formError}
          </p>
        )}
        <div class="actions">
          <Button type="submit" busy={busy}>
            Save
          </Button>
          <p role="status" class="status">
            <MessageText message={status} />
          </p>
        </div>
      </form>
    </section>
  );
}
