import { errorResponses, named } from '@tessera/contracts';
import { Type } from 'typebox';
import { TOKEN_PAIR_EXAMPLE, TokenPair } from '../tokens/schemas.ts';
import { USER_EXAMPLE, User } from '../users/user.ts';

// Checked after normalization (email-address.ts, the routes' preValidation hooks).
const NORMALIZED =
  'Surrounding blanks are trimmed and the address is lower-cased before it is checked and used: ' +
  '" Alice@Example.com " is alice@example.com. A domain in Unicode is taken in its ASCII (punycode) ' +
  'form: user@bücher.de is user@xn--bcher-kva.de.';
const Email = Type.String({ format: 'email', maxLength: 254, description: NORMALIZED });
const SendTo = Type.String({
  format: 'email',
  maxLength: 254,
  description:
    `${NORMALIZED} Refused, as mail servers would refuse them: non-ASCII characters before the @, ` +
    'more than 64 characters before the @, a domain label of more than 63, an all-numeric top-level ' +
    'domain (an IP address) and the .invalid domain.',
});
const SignupTag = (description: string) =>
  Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$', description }));
const tags = ['auth'];

export const sendOtpEmailSchema = {
  operationId: 'sendOtpEmail',
  summary: 'Send a 4-digit sign-in code by email',
  description: 'Answers once the email is queued, not once it is delivered. No access token.',
  tags,
  security: [],
  body: named(
    'SendCodeBody',
    Type.Object({ email: SendTo }, { examples: [{ email: 'alice@example.com' }] }),
    'The email address to send a sign-in code to',
  ),
  response: {
    200: named(
      'SendCodeResult',
      Type.Object(
        {
          email: Type.String({ description: 'The normalized address' }),
          expiresIn: Type.Integer({ description: 'Seconds until the code expires' }),
          resendIn: Type.Integer({ description: 'Seconds until another code may be requested' }),
          code: Type.Optional(Type.String({ description: 'Development and test environments only' })),
        },
        {
          description: 'The code is on its way: its email is queued',
          examples: [{ email: 'alice@example.com', expiresIn: 300, resendIn: 60 }],
        },
      ),
      'A sign-in code is on its way: where to, how long it lasts, when another may be requested',
    ),
    ...errorResponses(
      [
        400,
        'the body breaks a rule, such as an address that is malformed or that no mail could reach; the details say which',
      ],
      [
        429,
        'a code was sent to this email moments ago, too many codes for its inbox (its +tag variants, and at Gmail its dotted spellings, count as one) or from the address, or too many wrong codes for the email',
      ],
      503,
    ),
  },
};

export const verifyOtpEmailSchema = {
  operationId: 'verifyOtpEmail',
  summary: 'Sign in with the emailed code',
  description:
    'The first successful verification for an email creates its user, and so does the first once its ' +
    "account's deletion is due (that account is erased first). Every success starts a new session. " +
    'No access token.',
  tags,
  security: [],
  body: named(
    'VerifyCodeBody',
    Type.Object(
      {
        email: Email,
        code: Type.String({ pattern: '^[0-9]{4}$', description: '4 digits' }),
        signupSource: SignupTag(
          'Where a new account came from; stored only when this sign-in creates the user',
        ),
        signupCampaign: SignupTag(
          'The campaign that brought a new account; stored only when this sign-in creates it',
        ),
      },
      { examples: [{ email: 'alice@example.com', code: '0421' }] },
    ),
    'The emailed code, and where a new account came from',
  ),
  response: {
    200: named(
      'LoginResult',
      Type.Object(
        {
          ...TokenPair.properties,
          user: User,
          isRegistrationComplete: Type.Boolean({
            description: 'Whether the client must show the registration/consent flow now',
          }),
        },
        {
          description: 'Signed in: the token pair, the user and whether registration is complete now',
          examples: [{ ...TOKEN_PAIR_EXAMPLE, user: USER_EXAMPLE, isRegistrationComplete: true }],
        },
      ),
      'A successful sign-in: the token pair, the User, and whether the client must show the registration flow now',
    ),
    ...errorResponses(
      [400, 'the body breaks a rule, or the code is wrong (detail "Invalid code")'],
      [404, 'no active code for this email: never sent, expired or already used'],
      [409, 'the code is locked after too many wrong attempts; request a new one'],
      [429, 'too many wrong codes for this email or from this IP address'],
      503,
    ),
  },
};
