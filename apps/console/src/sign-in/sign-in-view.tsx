import type { SendCodeResult } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Button, useBusy } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { TextField } from '../fields.tsx';
import { displayEmail, formatTime, formatWait } from '../format.ts';
import { type Message, MessageText, useMessage } from '../message.tsx';
import { codeDigits } from './code-digits.ts';
import { isAboutCode, isAboutEmail, sendCodeFailure, verifyCodeFailure } from './sign-in-failures.ts';

const EMAIL = /^[^\s@]+@[^\s@]+$/;
const CODE = /^\d{4}$/;

/**
 * Whole seconds until a new code may be asked for, counted down once a second on the page's clock;
 * 0 once `until` (a time in ms, from the last answer's `resendIn`) has passed or when there is none.
 */
function useSecondsUntil(until: number | null): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (until === null) return;
    setNow(Date.now());
    const timer = setInterval(() => {
      const time = Date.now();
      setNow(time);
      if (time >= until) clearInterval(timer);
    }, 1000);
    return () => clearInterval(timer);
  }, [until]);
  return until === null ? 0 : Math.max(0, Math.ceil((until - now) / 1000));
}

/** Whether `until` (an ISO time, '' for none) has passed, on the page's clock: true once it comes. */
function usePassed(until: string): boolean {
  const [passed, setPassed] = useState(false);
  useEffect(() => {
    setPassed(false);
    if (!until) return;
    const timer = setTimeout(() => setPassed(true), Date.parse(until) - Date.now());
    return () => clearTimeout(timer);
  }, [until]);
  return passed;
}

/**
 * Sign-in in two steps on one page: the email (a code is sent to it), then the code. The second
 * step can send a new code or start over with another email.
 */
export function SignInView({ notice }: { notice?: string | undefined }) {
  const { tessera, enter } = useConsole();
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [sent, setSent] = useState<SendCodeResult | null>(null);
  /** Until when the code sent works, from its `expiresIn`: a time that stays true while the page waits. */
  const [worksUntil, setWorksUntil] = useState('');
  const expired = usePassed(worksUntil);
  /** What is wrong with the field of the current step (the email, or the code typed). */
  const [error, setError] = useMessage();
  /**
   * What went wrong that is not about what was typed, so not the field's: an outage, no network, a
   * limit, a new code not sent.
   */
  const [formError, setFormError] = useMessage();
  const [status, setStatus] = useMessage();
  /** When the API allows another code (ms), from the last answer's `resendIn`. */
  const [resendAt, setResendAt] = useState<number | null>(null);
  const resendWait = useSecondsUntil(resendAt);
  const [announced, setAnnounced] = useState('');
  const { busy, run } = useBusy();
  const emailInput = useRef<HTMLDivElement>(null);
  const codeInput = useRef<HTMLDivElement>(null);
  const codeStep = sent !== null;

  useEffect(() => {
    document.title = 'Sign in';
  }, []);
  // Why the form is shown again goes into a live region that is already on the page, so that a
  // screen reader reads it (one rendered with its text already in it may not be announced).
  useEffect(() => {
    setAnnounced(notice ?? '');
  }, [notice]);
  // The field of the current step has the focus, so typing and Enter are all a person needs.
  useEffect(() => {
    (codeStep ? codeInput : emailInput).current?.querySelector('input')?.focus();
  }, [codeStep]);
  // Said when it happens, rather than found out from a refused code.
  useEffect(() => {
    if (expired) setStatus('This code has expired. Send a new code.');
  }, [expired]);

  async function send(address: string) {
    const result = await tessera.auth.sendCode(address);
    setSent(result);
    setWorksUntil(new Date(Date.now() + result.expiresIn * 1000).toISOString());
    setCode('');
    setResendAt(Date.now() + result.resendIn * 1000);
    return result;
  }

  function sendCode(event: Event) {
    event.preventDefault();
    const address = email.trim();
    if (!EMAIL.test(address)) {
      setError('Enter your email address, such as name@example.com.');
      return;
    }
    void run(async () => {
      setError();
      setFormError();
      try {
        await send(address);
        setStatus();
      } catch (failure) {
        (isAboutEmail(failure) ? setError : setFormError)(sendCodeFailure(failure));
      }
    });
  }

  function sendNewCode() {
    if (!sent || resendWait > 0) return;
    void run(async () => {
      setStatus();
      setFormError();
      try {
        const result = await send(sent.email);
        // A problem with the code typed before is one no longer.
        setError();
        setStatus(`A new code is on its way to ${displayEmail(result.email)}.`);
      } catch (failure) {
        // About sending, not about the code typed: never the field's.
        setFormError(sendCodeFailure(failure));
      }
    });
  }

  function verifyCode(event: Event) {
    event.preventDefault();
    if (!sent) return;
    if (!CODE.test(code)) {
      setError('Enter the 4-digit code from the email.');
      return;
    }
    void run(async () => {
      setError();
      setFormError();
      try {
        await tessera.auth.verifyCode(sent.email, code);
        enter();
      } catch (failure) {
        if (!isAboutCode(failure)) {
          setFormError(verifyCodeFailure(failure));
          return;
        }
        setError(verifyCodeFailure(failure));
        // The field now says it, and why: not twice.
        if (expired) setStatus();
        // Selected, so that typing the right code replaces the wrong one.
        codeInput.current?.querySelector('input')?.select();
      }
    });
  }

  function startOver() {
    setSent(null);
    setWorksUntil('');
    setResendAt(null);
    setError();
    setFormError();
    setStatus();
  }

  return (
    <main class="page page--narrow">
      <h1>Sign in</h1>
      <p role="status" class={announced ? 'notice' : 'visually-hidden'}>
        {announced}
      </p>
      {!sent ? (
        <form class="card" onSubmit={sendCode} noValidate>
          <p>We will email you a 4-digit code. No password needed.</p>
          <div ref={emailInput}>
            <TextField
              id="email"
              label="Email"
              type="email"
              autoComplete="email"
              inputMode="email"
              spellcheck={false}
              value={email}
              onInput={setEmail}
              error={error.text || undefined}
              errorKey={error.key}
            />
          </div>
          <Button type="submit" busy={busy}>
            Send code
          </Button>
          <FormError message={formError} />
        </form>
      ) : (
        <form class="card" onSubmit={verifyCode} noValidate>
          {sent.code && (
            <p class="dev-code">
              Development only: the code is <strong>{sent.code}</strong>.
            </p>
          )}
          <div ref={codeInput}>
            {/* The hint is read out with the field, which has the focus as soon as the code is sent. */}
            <TextField
              id="code"
              label="Code"
              hint={`4 digits, sent to ${displayEmail(sent.email)}. ${expired ? 'It stopped working at' : 'It works until'} ${formatTime(worksUntil)}.`}
              autoComplete="one-time-code"
              inputMode="numeric"
              value={code}
              normalize={codeDigits}
              onInput={setCode}
              error={error.text || undefined}
              errorKey={error.key}
            />
          </div>
          <div class="actions">
            <Button type="submit" busy={busy}>
              Sign in
            </Button>
            <Button
              type="button"
              class="link"
              busy={busy}
              unavailable={resendWait > 0}
              aria-describedby={resendWait > 0 ? 'resend-wait' : undefined}
              onClick={sendNewCode}
            >
              Send a new code
            </Button>
            <button type="button" class="link" onClick={startOver}>
              Use another email
            </button>
          </div>
          {resendWait > 0 && (
            <p id="resend-wait" class="hint">
              You can send a new code in {formatWait(resendWait)}.
            </p>
          )}
          <FormError message={formError} />
          <p role="status" class="status">
            <MessageText message={status} />
          </p>
        </form>
      )}
    </main>
  );
}

/** A failure of the form, not of its field: announced at once, the field not marked invalid. */
function FormError({ message }: { message: Message }) {
  return message.text ? (
    <p key={message.key} class="alert" role="alert">
      {message.text}
    </p>
  ) : null;
}
