import { meter } from '@tessera/telemetry';

export const codesSent = meter.createCounter('tessera.codes.sent', {
  description: 'One-time codes issued and queued for email',
});
export const verifications = meter.createCounter('tessera.verifications', {
  description: 'Code verifications by result: ok, wrong, locked, expired (no active code) or limited',
});

// Every series from the start, so that rate() and alerts see the first event too.
for (const result of ['ok', 'wrong', 'locked', 'expired', 'limited']) verifications.add(0, { result });
