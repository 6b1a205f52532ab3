import { errorResponses, named } from '@tessera/contracts';
import { Type } from 'typebox';
import { UserPatch } from './profile.ts';
import { userAnswer } from './user.ts';

const bearer = [{ bearerAuth: [] }];
const tags = ['users'];

// What planProfileUpdate does before any rule: a client validating against the document trims first.
const TRIMMED = 'Surrounding blanks are trimmed before it is checked.';
const ENTRIES_TRIMMED = "Each entry's surrounding blanks are trimmed before it is checked.";

/**
 * `UserPatch` as the document shows it: every string is trimmed before it is checked, so each field
 * that takes one says so beside its pattern and lengths, which apply to the trimmed value (the
 * patterns stay those of the stored form). The route does not validate with it: planProfileUpdate does.
 */
const DocumentedUserPatch: typeof UserPatch = named('UserPatch', {
  ...UserPatch,
  properties: Object.fromEntries(
    Object.entries(UserPatch.properties).map(([name, field]) => {
      const { description, type } = field as { description?: string; type?: unknown };
      if (type === 'boolean') return [name, field];
      const note = name === 'interests' ? ENTRIES_TRIMMED : TRIMMED;
      return [name, { ...field, description: description ? `${description} ${note}` : note }];
    }),
  ) as typeof UserPatch.properties,
});

export const getMeSchema = {
  operationId: 'getMe',
  summary: "The caller's profile",
  tags,
  security: bearer,
  response: { 200: { ...userAnswer(), description: "The caller's User" }, ...errorResponses(401, 503) },
};

export const patchMeSchema = {
  operationId: 'updateMe',
  summary: "Change the caller's profile (absent fields are left alone, null clears)",
  description:
    'Every string (and every interests entry) is trimmed before it is checked: the patterns and lengths ' +
    'below apply to the trimmed value, so `{ "instagram": " @ada " }` is accepted and stored as `ada`. ' +
    'Usernames are lower-cased and unique whatever their case. Read-only and unknown fields are a 400 ' +
    'naming the field. Every failing rule is one detail that names the field.',
  tags,
  security: bearer,
  body: DocumentedUserPatch,
  response: {
    200: { ...userAnswer(), description: 'Changed: the updated User' },
    ...errorResponses(
      [400, 'every failing field is one detail naming it (read-only and unknown fields too)'],
      401,
      [409, 'the username is taken, or was changed too recently (the detail says when it is possible)'],
      503,
    ),
  },
};

const Requirement = named(
  'RegistrationRequirement',
  Type.Enum(['name', 'surname', 'username', 'privacyPolicy', 'termsOfUse']),
  'Something the user must still give or accept before the registration is complete',
);

export const registrationSchema = {
  operationId: 'getRegistration',
  summary: 'What the client must still show before the registration is complete',
  tags,
  security: bearer,
  response: {
    200: named(
      'RegistrationStatus',
      Type.Object(
        {
          isRegistrationComplete: Type.Boolean({
            description: 'Every requirement met against the current versions',
          }),
          missing: Type.Array(Requirement, {
            description: 'In this order: name, surname, username, privacyPolicy, termsOfUse',
          }),
          policies: named(
            'CurrentPolicies',
            Type.Object({
              privacyPolicyVersion: Type.String(),
              termsOfUseVersion: Type.String(),
              consentFormVersion: Type.Union([Type.String(), Type.Null()], {
                description: 'null: no consent form is in use',
              }),
            }),
            'The versions of the policies in force, the ones a user accepts',
          ),
        },
        {
          description: 'What registration still needs, and the policy versions in force',
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
      'What the client must still show before the registration is complete, and the policy versions in force',
    ),
    ...errorResponses(401, 503),
  },
};
