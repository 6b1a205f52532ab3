import { DependencyUnavailableError } from '@tessera/contracts';
import { meter } from '@tessera/telemetry';
import type { FastifyBaseLogger } from 'fastify';
import type { OtpStore } from './otp.store.ts';

const secretsSeen = meter.createGauge('tessera.otp.secrets', {
  description:
    "Different OTP_SECRETs the gateways of this Redis prefix ran with in the last 5 minutes, at this gateway's last check: 1 when they agree",
});

/** Seconds between two checks of a gateway, the first at its start. */
export const OTP_SECRET_CHECK_INTERVAL = 60;

/** Seconds a gateway's `OTP_SECRET` counts after it last told it: a few of the checks' intervals. */
export const OTP_SECRET_WINDOW = 5 * OTP_SECRET_CHECK_INTERVAL;

/**
 * A check that every gateway of this Redis prefix runs with one `OTP_SECRET`. With two, a code sent
 * through one gateway is refused by another (404, as if it had expired) and the sign-in limits are
 * counted apart, and nothing else shows it. Each gateway tells its own (a fingerprint) at every check;
 * a change of the secret rolled out over the fleet shows until the window after it, as it should.
 */
export function otpSecretCheck(otp: OtpStore, log: FastifyBaseLogger, windowSeconds = OTP_SECRET_WINDOW) {
  return async () => {
    let seen: number;
    try {
      seen = (await otp.secretsTold(windowSeconds * 1000, true)).told;
    } catch (error) {
      // An outage is told once by the Redis client already; the next check after it tells again.
      if (error instanceof DependencyUnavailableError) return;
      throw error;
    }
    secretsSeen.record(seen);
    if (seen > 1)
      log.warn(
        { otpSecrets: seen },
        `the gateways of this Redis prefix ran with ${seen} different OTP_SECRETs in the last ${windowSeconds} seconds: a code sent through one is refused by another, and the sign-in limits are counted apart; give every gateway the same`,
      );
  };
}
