import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { GatewayError } from '../../errors.ts';
import { clientInfo } from '../security-events/security-events.ts';
import { toUser } from '../users/user.ts';
import { normalizeEmail, undeliverable } from './email-address.ts';
import { sendOtpEmailSchema, verifyOtpEmailSchema } from './schemas.ts';
import type { SignInService } from './sign-in.service.ts';

// Normalized before validation, so the schema checks (and every later use sees) the canonical address;
// an address no mail could reach is refused here, with what is wrong with it, as the schema's field says.
async function normalizeEmailField(request: FastifyRequest) {
  const body = request.body as { email?: unknown } | undefined;
  if (!body || typeof body !== 'object' || typeof body.email !== 'string') return;
  const email = normalizeEmail(body.email);
  body.email = email;
  const problem = undeliverable(email);
  if (problem !== undefined) throw new GatewayError('VALIDATION_FAILED', [`body.email ${problem}`]);
}

/** send-otp-email and verify-otp-email, under /api/v1/auth. */
const signInRoutes: FastifyPluginAsyncTypebox<{ signIn: SignInService }> = async (app, { signIn }) => {
  app.addHook('preValidation', normalizeEmailField);

  app.post('/send-otp-email', { schema: sendOtpEmailSchema }, (request) =>
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
