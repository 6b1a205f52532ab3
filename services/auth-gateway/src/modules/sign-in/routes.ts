import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { success } from '@tessera/contracts';
import type { FastifyRequest } from 'fastify';
import { clientInfo } from '../security-events/security-events.ts';
import type { SessionsService } from '../sessions/sessions.service.ts';
import { createOtpStore } from './otp.store.ts';
import { sendOtpEmailSchema, verifyOtpEmailSchema } from './schemas.ts';
import { createSignInService, normalizeEmail } from './sign-in.service.ts';

// Normalized before validation, so the schema checks (and every later use sees) the canonical address.
async function normalizeEmailField(request: FastifyRequest) {
  const body = request.body as { email?: unknown } | undefined;
  if (body && typeof body === 'object' && typeof body.email === 'string')
    body.email = normalizeEmail(body.email);
}

/** send-otp-email and verify-otp-email, under /api/v1/auth. */
const signInRoutes: FastifyPluginAsyncTypebox<{ sessions: SessionsService }> = async (app, { sessions }) => {
  const { config, clock } = app;
  const signIn = createSignInService({
    db: app.db,
    otp: createOtpStore(app.redis, clock, {
      secret: config.OTP_SECRET,
      ttlSeconds: config.OTP_TTL,
      maxAttempts: config.OTP_MAX_ATTEMPTS,
      limits: {
        resendCooldown: config.OTP_RESEND_COOLDOWN,
        maxSendsPerEmailPerHour: config.OTP_MAX_SENDS_PER_EMAIL_PER_HOUR,
        maxSendsPerIpPerHour: config.OTP_MAX_SENDS_PER_IP_PER_HOUR,
        maxFailuresPerEmailPerDay: config.OTP_MAX_FAILURES_PER_EMAIL_PER_DAY,
        maxFailuresPerIpPerHour: config.OTP_MAX_FAILURES_PER_IP_PER_HOUR,
      },
    }),
    enqueueOtpEmail: app.enqueueOtpEmail,
    sessions,
    clock,
    log: app.log,
    otpTtl: config.OTP_TTL,
    resendCooldown: config.OTP_RESEND_COOLDOWN,
    exposeCode: config.APP_ENV !== 'production',
    policies: { privacyPolicy: config.PRIVACY_POLICY_VERSION, termsOfUse: config.TERMS_OF_USE_VERSION },
  });

  app.addHook('preValidation', normalizeEmailField);

  app.post('/send-otp-email', { schema: sendOtpEmailSchema }, async (request) =>
    success(await signIn.sendCode(request.body.email, clientInfo(request)), clock.now()),
  );

  app.post('/verify-otp-email', { schema: verifyOtpEmailSchema }, async (request) => {
    const { email, code } = request.body;
    return success(await signIn.verifyCode(email, code, clientInfo(request)), clock.now());
  });
};

export default signInRoutes;
