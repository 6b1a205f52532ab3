import { meter } from '@tessera/telemetry';

const OUTCOMES = ['sent', 'failed', 'retried', 'expired', 'replaced', 'stalled'] as const;

/** `tessera_emails_total{outcome}` in Prometheus. */
export const emails = meter.createCounter<{ outcome: (typeof OUTCOMES)[number] }>('tessera.emails', {
  description:
    "Emails (codes, account notices) by outcome: sent, failed (for good), retried (a failed attempt that will be retried), expired (its deadline passed before it could be sent), replaced (a code outdated by the next code sent to its address, an account notice by the account's next one) or stalled (taken back from a mailer that stopped while it held the job, to be sent again)",
});
// Every series from the start, so that rate() and alerts see the first email too.
for (const outcome of OUTCOMES) emails.add(0, { outcome });
