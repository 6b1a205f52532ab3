import type { SendCodeResult } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Button, useBusy } from '../busy.tsx';
import { useConsole } from '../console-context.ts';
import { TextField } from '../fields.tsx';
import { formatWait } from '../format.ts';
import { codeDigits } from './code-digits.ts';
import { sendCodeFailure, verifyCodeFailure } from './sign-in-failures.ts';

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

/**
 * Sign-in in two steps on one page: the email (a code is sent to it), then the code. The second
 * step can send a new code or start over with another email.
 */
export function SignInView({ notice }: { notice?: string | undefined }) {
  const { tessera, enter } = useConsole();
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [sent, setSent] = useState<SendCodeResult | null>(null);
  /** What is wrong with the field of the current step (the email, or the code typed). */
  const [error, setError] = useState<string | undefined>();
  /** Why a new code was not sent: about sending, not about the code typed, so not the field's. */
  const [resendError, setResendError] = useState<string | undefined>();
  const [status, setStatus] = useState('');
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

  async function send(address: string) {
    const result = await tessera.auth.sendCode(address);
    setSent(result);
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
      setError(undefined);
      try {
        await send(address);
        setStatus('');
      } catch (failure) {
        setError(sendCodeFailure(failure));
      }
    });
  }

  function sendNewCode() {
    if (!sent || resendWait > 0) return;
    void run(async () => {
      setStatus('');
      setResendError(undefined);
      try {
        const result = await send(sent.email);
        // A problem with the code typed before is one no longer.
        setError(undefined);
        setStatus(`A new code is on its way to ${result.email}.`);
      } catch (failure) {
        setResendError(sendCodeFailure(failure));
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
      setError(undefined);
      setResendError(undefined);
      try {
        await tessera.auth.verifyCode(sent.email, code);
        enter();
      } catch (failure) {
        setError(verifyCodeFailure(failure));
        codeInput.current?.querySelector('input')?.select();
      }
    });
  }

  function startOver() {
    setSent(null);
    setResendAt(null);
    setError(undefined);
    setResendError(undefined);
    setStatus('');
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
              error={error}
            />
          </div>
          <Button type="submit" busy={busy}>
            Send code
          </Button>
        </form>
      ) : (
        <form class="card" onSubmit={verifyCode} noValidate>
          <p>
            We sent a code to <strong>{sent.email}</strong>. It expires in {formatWait(sent.expiresIn)}.
          </p>
          {sent.code && (
            <p class="dev-code">
              Development only: the code is <strong>{sent.code}</strong>.
            </p>
          )}
          <div ref={codeInput}>
            <TextField
              id="code"
              label="Code"
              autoComplete="one-time-code"
              inputMode="numeric"
              value={code}
              normalize={codeDigits}
              onInput={setCode}
              error={error}
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
          {resendError && (
            <p class="alert" role="alert">
              {resendError}
            </p>
          )}
          <p role="status" class="status">
            {status}
          </p>
        </form>
      )}
    </main>
  );
}
