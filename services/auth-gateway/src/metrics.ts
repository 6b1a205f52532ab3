import { meter } from '@tessera/telemetry';

/** What the gateway counts, beyond request durations (plugins/metrics.ts). */
export const codesSent = meter.createCounter('tessera.codes.sent', {
  description: 'One-time codes issued and queued for email',
});
export const verifications = meter.createCounter('tessera.verifications', {
  description: 'Code verifications by result: ok, wrong, locked, expired (no active code) or limited',
});
export const refreshes = meter.createCounter('tessera.refreshes', {
  description: 'Refresh-token presentations by result: ok, grace, reuse or invalid',
});
export const sessionsEnded = meter.createCounter('tessera.sessions.ended', {
  description: 'Sessions ended, by reason: revoked, logout, signed_out or refresh_token_reuse',
});

// Every series from the start, so that rate() and alerts see the first event too.
for (const result of ['ok', 'wrong', 'locked', 'expired', 'limited']) verifications.add(0, { result });
for (const result of ['ok', 'grace', 'reuse', 'invalid']) refreshes.add(0, { result });
for (const reason of ['revoked', 'logout', 'signed_out', 'refresh_token_reuse'])
  sessionsEnded.add(0, { reason });
