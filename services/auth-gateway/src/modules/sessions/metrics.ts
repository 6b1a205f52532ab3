import { meter } from '@tessera/telemetry';

export const refreshes = meter.createCounter('tessera.refreshes', {
  description: 'Refresh-token presentations by result: ok, grace, reuse or invalid',
});
export const sessionsEnded = meter.createCounter('tessera.sessions.ended', {
  description:
    'Sessions ended, by reason: revoked, logout, signed_out, refresh_token_reuse or account_deleted',
});

// Every series from the start, so that rate() and alerts see the first event too.
for (const result of ['ok', 'grace', 'reuse', 'invalid']) refreshes.add(0, { result });
for (const reason of ['revoked', 'logout', 'signed_out', 'refresh_token_reuse', 'account_deleted'])
  sessionsEnded.add(0, { reason });
