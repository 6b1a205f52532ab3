import type { SendCodeResult } from '@tessera/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { useConsole } from '../console-context.ts';
import { TextField } from '../fields.tsx';
import { formatWait } from '../format.ts';
import { sendCodeFailure, verifyCodeFailure } from './sign-in-failures.ts';

const EMAIL = /^[^\s@]+@[^\s@]+$/;
const CODE = /^\d{4}$/;

/**
 * Sign-in in two steps on one page: the email (a code is sent to it), then the code. The second
 * step can send a new code or start over with another email.
 */
export function SignInView({ notice }: { notice?: string | undefined }) {
  const { tessera, enter } = useConsole();
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [sent, setSent] = useState<SendCodeResult | null>(null);
  const [error, setError] = useState<string | undefined>();
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const emailInput = useRef<HTMLDivElement>(null);
  const codeInput = useRef<HTMLDivElement>(null);

  useEffect(() => {
    document.title = 'Sign in';
  }, []);
  // The field of the current step has the focus, so typing and Enter are all a person needs.
  useEffect(() => {
    (sent ? codeInput : emailInput).current?.querySelector('input')?.focus();
  }, [sent]);

  async function sendCode(event?: Event) {
    event?.preventDefault();
    const address = email.trim();
    if (!EMAIL.test(address)) {
      setError('Enter your email address, such as name@example.com.');
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      const result = await tessera.auth.sendCode(address);
      setSent(result);
      setCode('');
      setStatus(sent ? `A new code is on its way to ${result.email}.` : '');
    } catch (failure) {
      setError(sendCodeFailure(failure));
    } finally {
      setBusy(false);
    }
  }

  async function verifyCode(event: Event) {
    event.preventDefault();
    if (!sent) return;
    const digits = code.trim();
    if (!CODE.test(digits)) {
      setError('Enter the 4-digit code from the email.');
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      await tessera.auth.verifyCode(sent.email, digits);
      enter();
    } catch (failure) {
      setError(verifyCodeFailure(failure));
      setBusy(false);
      codeInput.current?.querySelector('input')?.select();
    }
  }

  function startOver() {
    setSent(null);
    setError(undefined);
    setStatus('');
  }

  return (
    <main class="page page--narrow">
      <h1>Sign in</h1>
      {notice && <p class="notice">{notice}</p>}
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
          <button type="submit" disabled={busy}>
            Send code
          </button>
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
              maxLength={4}
              value={code}
              onInput={setCode}
              error={error}
            />
          </div>
          <div class="actions">
            <button type="submit" disabled={busy}>
              Sign in
            </button>
            <button type="button" class="link" disabled={busy} onClick={() => void sendCode()}>
              Send a new code
            </button>
            <button type="button" class="link" onClick={startOver}>
              Use another email
            </button>
          </div>
          <p role="status" class="status">
            {status}
          </p>
        </form>
      )}
    </main>
  );
}
