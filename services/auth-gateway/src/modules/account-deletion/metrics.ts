import { meter } from '@tessera/telemetry';

const TRANSITIONS = ['requested', 'cancelled', 'finalized'] as const;

/** `tessera_account_deletions_total{transition}`. */
export const accountDeletions = meter.createCounter<{ transition: (typeof TRANSITIONS)[number] }>(
  'tessera.account_deletions',
  { description: 'Account deletion transitions: requested, cancelled, or finalized by the sweep' },
);

// Every series from the start, so that rate() and alerts see the first event too.
for (const transition of TRANSITIONS) accountDeletions.add(0, { transition });
