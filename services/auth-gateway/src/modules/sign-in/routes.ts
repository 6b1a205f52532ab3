import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { GatewayError } from '../../errors.ts';
import { clientInfo } from '../security-events/security-events.ts';
import { toUser } from '../users/user.ts';
import { normalizeEmail, undeliverable } from './email-address.ts';
import { sendOtpEmailSchema, verifyOtpEmailSchema } from './schemas.ts';
import type { SignInService } from './sign-in.service.ts';

// Normalized before validation, so the schema checks (and every later use sees) the canonical address.
async function normalizeEmailField(request: FastifyRequest) {
  const body = request.body as { email?: unknown } | undefined;
  if (body && typeof body === 'object' && typeof body.email === 'string')
    body.email = normalizeEmail(body.email);
}

// No code is sent where no mail could reach, and the client is told what is wrong with the address, as
// the schema's field says. Verification takes any address: one that signed up before still signs in.
async function refuseUndeliverable(request: FastifyRequest) {
  const email = (request.body as { email?: unknown } | null | undefined)?.email;
  const problem = typeof email === 'string' ? undeliverable(email) : undefined;
  if (problem !== undefined) throw new GatewayError('VALIDATION_FAILED', [`body.email ${problem}`]);
}

/** send-otp-email and verify-otp-email, under /api/v1/auth. */
const signInRoutes: FastifyPluginAsyncTypebox<{ signIn: SignInService }> = async (app, { signIn }) => {
  app.addHook('preValidation', normalizeEmailField);

  app.post('/send-otp-email', { schema: sendOtpEmailSchema, preValidation: refuseUndeliverable }, (request) =>
    signIn.sendCode(request.body.email, clientInfo(request)),
  );

  app.post('/verify-otp-email', { schema: verifyOtpEmailSchema }, async (request) => {
    const { email, code, signupSource, signupCampaign } = request.body;
    const signup = { signupSource, signupCampaign };
    const { tokens, user, isRegistrationComplete } = await signIn.verifyCode(
      email,
      code,
      clientInfo(request),
      signup,
    );
    return { ...tokens, user: toUser(user), isRegistrationComplete };
  });
};

export default signInRoutes;
