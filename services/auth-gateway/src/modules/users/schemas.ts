import { errorResponses } from '@tessera/contracts';
import { Type } from 'typebox';
import { UserPatch } from './profile.ts';
import { userAnswer } from './user.ts';

const bearer = [{ bearerAuth: [] }];
const tags = ['users'];

export const getMeSchema = {
  summary: "The caller's profile",
  tags,
  security: bearer,
  response: { 200: userAnswer(), ...errorResponses(401, 503) },
};

export const patchMeSchema = {
  summary: "Change the caller's profile (absent fields are left alone, null clears)",
  description:
    'Strings are trimmed; usernames are lower-cased and unique whatever their case. Read-only and unknown ' +
    'fields are a 400 naming the field. Every failing rule is one detail that names the field.',
  tags,
  security: bearer,
  body: UserPatch,
  response: { 200: userAnswer(), ...errorResponses(400, 401, 409, 503) },
};

const Requirement = Type.Enum(['name', 'surname', 'username', 'privacyPolicy', 'termsOfUse']);

export const registrationSchema = {
  summary: 'What the client must still show before the registration is complete',
  tags,
  security: bearer,
  response: {
    200: Type.Object(
      {
        isRegistrationComplete: Type.Boolean({
          description: 'Every requirement met against the current versions',
        }),
        missing: Type.Array(Requirement, {
          description: 'In this order: name, surname, username, privacyPolicy, termsOfUse',
        }),
        policies: Type.Object({
          privacyPolicyVersion: Type.String(),
          termsOfUseVersion: Type.String(),
          consentFormVersion: Type.Union([Type.String(), Type.Null()], {
            description: 'null: no consent form is in use',
          }),
        }),
      },
      {
        examples: [
          {
            isRegistrationComplete: false,
            missing: ['username', 'termsOfUse'],
            policies: {
              privacyPolicyVersion: '1.0.0',
              termsOfUseVersion: '1.1.0',
              consentFormVersion: '1.0.0',
            },
          },
        ],
      },
    ),
    ...errorResponses(401, 503),
  },
};
