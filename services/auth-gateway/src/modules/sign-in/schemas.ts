import { errorResponses, SuccessEnvelope } from '@tessera/contracts';
import { Type } from 'typebox';
import { TokenPair } from '../sessions/schemas.ts';
import { User } from '../users/user.ts';

// Checked after trimming and lower-casing (see the route's preValidation hook).
const Email = Type.String({ format: 'email', maxLength: 254, description: 'Trimmed and lower-cased' });

export const sendOtpEmailSchema = {
  summary: 'Send a 4-digit sign-in code by email',
  body: Type.Object({ email: Email }),
  response: {
    200: SuccessEnvelope(
      Type.Object({
        email: Type.String({ description: 'The normalized address' }),
        expiresIn: Type.Integer({ description: 'Seconds until the code expires' }),
        resendIn: Type.Integer({ description: 'Seconds until another code may be requested' }),
        code: Type.Optional(Type.String({ description: 'Development and test environments only' })),
      }),
    ),
    ...errorResponses(400, 429, 503),
  },
};

export const verifyOtpEmailSchema = {
  summary: 'Sign in with the emailed code',
  body: Type.Object({ email: Email, code: Type.String({ pattern: '^[0-9]{4}$', description: '4 digits' }) }),
  response: {
    200: SuccessEnvelope(
      Type.Object({
        ...TokenPair.properties,
        user: User,
        isRegistrationComplete: Type.Boolean({
          description: 'Whether the client must show the registration/consent flow now',
        }),
      }),
    ),
    ...errorResponses(400, 404, 409, 429, 503),
  },
};
