import type { Registration, User, UserPatch } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Button, useBusy } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { failureText, fieldProblems, isFailure } from '../failure-text.ts';
import { CheckField, focusFirstProblem, TextField } from '../fields.tsx';
import { displayEmail } from '../format.ts';

const LABELS = { name: 'Name', surname: 'Surname', username: 'Username' } as const;
type Field = keyof typeof LABELS | 'privacyPolicy' | 'termsOfUse';
type Problems = Partial<Record<Field, string>>;

/**
 * Shown after a sign-in while the API says the registration is not complete: for a new user, or
 * after a policy's version changed. Asks only for what is needed, pre-filled with what is known.
 */
export function RegistrationView({ registration, user }: { registration: Registration; user: User }) {
  const { tessera, enter, sessionEnded } = useConsole();
  const { policies, missing } = registration;
  // A returning user whose details are all there, asked again only because a policy changed.
  const policiesOnly = !missing.some((field) => field in LABELS);
  const title = policiesOnly ? 'Accept the updated policies' : 'Complete your registration';
  const [name, setName] = useState(user.name ?? '');
  const [surname, setSurname] = useState(user.surname ?? '');
  const [username, setUsername] = useState(user.username ?? '');
  const [privacy, setPrivacy] = useState(!missing.includes('privacyPolicy'));
  const [terms, setTerms] = useState(!missing.includes('termsOfUse'));
  const consentGiven = user.consentFormAccepted && user.consentFormVersion === policies.consentFormVersion;
  const [consent, setConsent] = useState(consentGiven);
  // After a policy update, only what asks for an answer: the policies with a new version, and the
  // consent form when the consent given was to an older version of it.
  const asks = {
    privacy: !policiesOnly || missing.includes('privacyPolicy'),
    terms: !policiesOnly || missing.includes('termsOfUse'),
    consent:
      Boolean(policies.consentFormVersion) && (!policiesOnly || (user.consentFormAccepted && !consentGiven)),
  };
  const [problems, setProblems] = useState<Problems>({});
  const [formError, setFormError] = useState<string | undefined>();
  const { busy, run } = useBusy();
  const heading = useRef<HTMLHeadingElement>(null);
  const form = useRef<HTMLFormElement>(null);

  /** Editing a field takes its problem away: the next Continue says whether it is solved. */
  const edit =
    <T,>(field: Field, set: (value: T) => void) =>
    (value: T) => {
      set(value);
      setProblems(({ [field]: _, ...rest }) => rest);
    };

  useEffect(() => {
    document.title = title;
    heading.current?.focus();
  }, []);

  function showProblems(found: Problems) {
    setProblems(found);
    // The first field with a problem takes the focus, in the order of the form.
    focusFirstProblem(form.current);
  }

  function submit(event: Event) {
    event.preventDefault();
    void run(send);
  }

  async function send() {
    const found: Problems = {};
    if (!name.trim()) found.name = 'Enter your name.';
    if (!surname.trim()) found.surname = 'Enter your surname.';
    if (!username.trim()) found.username = 'Choose a username.';
    if (!privacy) found.privacyPolicy = 'Accept the privacy policy to continue.';
    if (!terms) found.termsOfUse = 'Accept the terms of use to continue.';
    setFormError(undefined);
    if (Object.keys(found).length > 0) return showProblems(found);

    const patch: UserPatch = {};
    if (name.trim() !== user.name) patch.name = name.trim();
    if (surname.trim() !== user.surname) patch.surname = surname.trim();
    if (username.trim().toLowerCase() !== user.username) patch.username = username.trim();
    if (missing.includes('privacyPolicy')) {
      patch.privacyPolicyAccepted = true;
      patch.privacyPolicyVersion = policies.privacyPolicyVersion;
    }
    if (missing.includes('termsOfUse')) {
      patch.termsOfUseAccepted = true;
      patch.termsOfUseVersion = policies.termsOfUseVersion;
    }
    if (policies.consentFormVersion && consent !== consentGiven) {
      patch.consentFormAccepted = consent;
      if (consent) patch.consentFormVersion = policies.consentFormVersion;
    }

    try {
      await tessera.users.update(patch);
      enter();
    } catch (error) {
      if (sessionEnded(error)) return;
      if (isFailure(error) && (error.status === 400 || error.status === 409)) {
        const { byField, other } = fieldProblems(error, LABELS);
        if (other.length > 0) setFormError(other.join(' '));
        showProblems(byField);
      } else setFormError(failureText(error));
    }
  }

  return (
    <main class="page page--narrow">
      <h1 ref={heading} tabIndex={-1}>
        {title}
      </h1>
      <p class="muted">
        Signed in as {displayEmail(user.email)}.{' '}
        {policiesOnly
          ? 'A policy has a new version: accept it to go on to your account.'
          : 'A few details and you are done.'}
      </p>
      <form ref={form} class="card" onSubmit={submit} noValidate>
        {!policiesOnly && (
          <>
            <p class="muted">All fields are required unless marked optional.</p>
            <TextField
              id="name"
              label="Name"
              required
              autoComplete="given-name"
              value={name}
              onInput={edit('name', setName)}
              error={problems.name}
            />
            <TextField
              id="surname"
              label="Surname"
              required
              autoComplete="family-name"
              value={surname}
              onInput={edit('surname', setSurname)}
              error={problems.surname}
            />
            <TextField
              id="username"
              label="Username"
              required
              hint="3 to 30 characters: letters, digits, dots and underscores."
              autoComplete="username"
              spellcheck={false}
              value={username}
              onInput={edit('username', setUsername)}
              error={problems.username}
            />
          </>
        )}
        {asks.privacy && (
          <CheckField
            id="privacy-policy"
            label={`I accept the privacy policy (version ${policies.privacyPolicyVersion})`}
            required
            checked={privacy}
            onChange={edit('privacyPolicy', setPrivacy)}
            error={problems.privacyPolicy}
          />
        )}
        {asks.terms && (
          <CheckField
            id="terms-of-use"
            label={`I accept the terms of use (version ${policies.termsOfUseVersion})`}
            required
            checked={terms}
            onChange={edit('termsOfUse', setTerms)}
            error={problems.termsOfUse}
          />
        )}
        {asks.consent && (
          <CheckField
            id="consent"
            label={`I give my consent as described in the consent form (version ${policies.consentFormVersion}). Optional.`}
            checked={consent}
            onChange={setConsent}
          />
        )}
        {formError && (
          <p class="alert" role="alert">
            {formError}
          </p>
        )}
        <Button type="submit" busy={busy}>
          Continue
        </Button>
      </form>
    </main>
  );
}
