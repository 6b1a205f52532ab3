import { isIP } from 'node:net';
import { type Static, type TSchema, Type } from 'typebox';
import { isCalendarTime, LAST_TIME } from '../../calendar.ts';

export const GENDERS = ['female', 'male', 'non-binary', 'other', 'prefer-not-to-say'] as const;
export const AVAILABILITY_STATUSES = ['available', 'busy', 'away', 'offline'] as const;

const NAME_MAX = 60;
const USERNAME_MIN = 3;
const USERNAME_MAX = 30;
const PHONE_MAX_DIGITS = 15;
const MAX_AGE = 130;
const INTERESTS_MAX = 20;
const INTEREST_MAX = 40;
const EXPERTISE_MAX = 100;
const BIO_MAX = 500;
const HANDLE_MAX = 30;
const PHOTO_URL_MAX = 2048;
const TIME_ZONE_MAX = 64;

// One line of text (names, interests): no line or paragraph separators, and no bidirectional
// embeddings, overrides or isolates, which would turn the text around it when shown.
const ONE_LINE = '^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069]*$';
// Text of several lines (bio, expertise) keeps tabs and line breaks.
const NO_CONTROL_CHARACTERS_BUT_LINES = '^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$';
const USERNAME_PATTERN = '^[A-Za-z0-9_][A-Za-z0-9._]*[A-Za-z0-9_]$';
// Not www.…, which is the start of a URL.
const HANDLE_PATTERN = `^@?(?![Ww]{3}\\.)[A-Za-z0-9._]{1,${HANDLE_MAX}}$`;
// Named zones only: a UTC offset such as +03:00 is not an IANA name.
const TIME_ZONE_PATTERN = '^[A-Za-z][A-Za-z0-9_+/-]*$';

// Every field of a patch may be absent (left alone); these may also be null (cleared).
const Clearable = <T extends TSchema>(schema: T, description: string) =>
  Type.Optional(Type.Union([schema, Type.Null()], { description }));
const Handle = (site: string) =>
  Clearable(
    Type.String({ pattern: HANDLE_PATTERN }),
    `${site} handle: 1–${HANDLE_MAX} of A–Z a–z 0–9 . _; a leading @ is dropped; a URL is rejected. null clears it.`,
  );

/**
 * The body of `PATCH /api/v1/users/me` (API.md §8.9), for the OpenAPI document. Every string is trimmed
 * before the limits below apply; `planProfileUpdate` enforces these rules and the cross-field ones.
 */
export const UserPatch = Type.Object(
  {
    name: Clearable(
      Type.String({ minLength: 1, maxLength: NAME_MAX, pattern: ONE_LINE }),
      `Given name: 1–${NAME_MAX} characters (counted in Unicode NFC), at least one of them visible; no control characters, line separators or bidirectional controls. null clears it, but not once registration is complete.`,
    ),
    surname: Clearable(
      Type.String({ minLength: 1, maxLength: NAME_MAX, pattern: ONE_LINE }),
      `Family name: 1–${NAME_MAX} characters (counted in Unicode NFC), at least one of them visible; no control characters, line separators or bidirectional controls. null clears it, but not once registration is complete.`,
    ),
    username: Clearable(
      Type.String({ minLength: USERNAME_MIN, maxLength: USERNAME_MAX, pattern: USERNAME_PATTERN }),
      `${USERNAME_MIN}–${USERNAME_MAX} of a–z 0–9 . _, not starting or ending with "."; stored lower-cased and unique ` +
        'case-insensitively (taken → 409). Setting it the first time is always allowed; changing it is allowed ' +
        'once per USERNAME_CHANGE_COOLDOWN (earlier → 409 giving the time it becomes possible). Sending the current ' +
        'username changes nothing. null clears it (a change too, refused within the cooldown; it starts none), but not ' +
        'once registration is complete.',
    ),
    countryCode: Clearable(
      Type.String({ pattern: '^[0-9]{1,3}$' }),
      'Calling code, 1–3 digits without "+" (90). Sent together with phoneNumber; both null clears the phone number.',
    ),
    phoneNumber: Clearable(
      Type.String({ pattern: '^[0-9]{4,14}$' }),
      `National number, 4–14 digits; with countryCode at most ${PHONE_MAX_DIGITS} digits (E.164). Sent together with countryCode.`,
    ),
    birthDate: Clearable(
      Type.String({ format: 'date-time' }),
      `ISO 8601 date-time in the past; the user is at least MIN_AGE (default 13) and at most ${MAX_AGE} years old. null clears it.`,
    ),
    gender: Clearable(Type.Enum([...GENDERS]), 'null clears it.'),
    availabilityStatus: Clearable(Type.Enum([...AVAILABILITY_STATUSES]), 'null clears it.'),
    interests: Clearable(
      // No maxItems: the limit counts distinct entries, after duplicates collapse.
      Type.Array(Type.String({ minLength: 1, maxLength: INTEREST_MAX, pattern: ONE_LINE })),
      `At most ${INTERESTS_MAX} distinct entries of 1–${INTEREST_MAX} characters, at least one of them visible, no control characters, ` +
        'kept in order; duplicates (ignoring case) collapse into the first. null or [] clears them.',
    ),
    expertise: Clearable(
      Type.String({ maxLength: EXPERTISE_MAX, pattern: NO_CONTROL_CHARACTERS_BUT_LINES }),
      `At most ${EXPERTISE_MAX} characters; no control characters but tabs and line breaks. null or an empty string clears it.`,
    ),
    bio: Clearable(
      Type.String({ maxLength: BIO_MAX, pattern: NO_CONTROL_CHARACTERS_BUT_LINES }),
      `At most ${BIO_MAX} characters; no control characters but tabs and line breaks. null or an empty string clears it.`,
    ),
    instagram: Handle('Instagram'),
    x: Handle('X'),
    tiktok: Handle('TikTok'),
    snapchat: Handle('Snapchat'),
    facebook: Handle('Facebook'),
    profilePhoto: Clearable(
      Type.String({ format: 'uri', pattern: '^https://', maxLength: PHOTO_URL_MAX }),
      `An https:// URL of at most ${PHOTO_URL_MAX} characters, on a public host name (no IP address, localhost or local name), without credentials (user:password@); stored as a browser ` +
        'reads it (https://CDN.example.com\\ä.jpg → https://cdn.example.com/%C3%A4.jpg). null clears it.',
    ),
    timezone: Clearable(
      Type.String({ minLength: 1, maxLength: TIME_ZONE_MAX, pattern: TIME_ZONE_PATTERN }),
      'An IANA time zone name the server knows (Europe/Istanbul, UTC); a UTC offset such as +03:00 is rejected. ' +
        "Case is corrected to the server's spelling. An alias is kept as sent (US/Eastern), unless written in lower " +
        'case, which no tzdb reader knows: then it is stored as the zone it names (us/eastern → America/New_York). ' +
        'null clears it.',
    ),
    privacyPolicyAccepted: Type.Optional(
      Type.Literal(true, {
        description: 'Accepts the privacy policy; only with privacyPolicyVersion. Cannot be withdrawn here.',
      }),
    ),
    privacyPolicyVersion: Type.Optional(
      Type.String({
        description:
          'The current PRIVACY_POLICY_VERSION (see GET /api/v1/users/me/registration); any other is a 400.',
      }),
    ),
    termsOfUseAccepted: Type.Optional(
      Type.Literal(true, {
        description: 'Accepts the terms of use; only with termsOfUseVersion. Cannot be withdrawn here.',
      }),
    ),
    termsOfUseVersion: Type.Optional(
      Type.String({
        description:
          'The current TERMS_OF_USE_VERSION (see GET /api/v1/users/me/registration); any other is a 400.',
      }),
    ),
    consentFormAccepted: Type.Optional(
      Type.Boolean({
        description:
          'true accepts the consent form (with consentFormVersion; a 400 when no consent form is in use); ' +
          'false withdraws consent, keeping the stored version.',
      }),
    ),
    consentFormVersion: Type.Optional(
      Type.String({
        description:
          'With consentFormAccepted true: the current CONSENT_FORM_VERSION. With false it may be omitted, ' +
          'or be the version being withdrawn.',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'Partial update: an absent field is left alone, null clears an optional field, strings are trimmed ' +
      '(and counted in Unicode normalization form C: é is one character however it was typed); a string with a ' +
      'lone surrogate is a 400. A field sent exactly as stored changes nothing and is not checked again. ' +
      'Read-only and unknown fields are a 400 naming the field.',
    dependentRequired: {
      countryCode: ['phoneNumber'],
      phoneNumber: ['countryCode'],
      privacyPolicyAccepted: ['privacyPolicyVersion'],
      privacyPolicyVersion: ['privacyPolicyAccepted'],
      termsOfUseAccepted: ['termsOfUseVersion'],
      termsOfUseVersion: ['termsOfUseAccepted'],
      consentFormVersion: ['consentFormAccepted'],
    },
    examples: [
      {
        name: 'Ayşe',
        surname: 'Yılmaz',
        username: 'ayse.yilmaz',
        countryCode: '90',
        phoneNumber: '5321234567',
        birthDate: '1994-05-17T00:00:00.000Z',
        gender: 'female',
        availabilityStatus: 'available',
        interests: ['photography', 'hiking'],
        expertise: 'Landscape photography',
        bio: 'Photographer in Istanbul.',
        instagram: 'ayse.shoots',
        x: '@ayseyilmaz',
        tiktok: null,
        snapchat: null,
        facebook: null,
        profilePhoto: 'https://cdn.example.com/users/ayse.jpg',
        timezone: 'Europe/Istanbul',
        privacyPolicyAccepted: true,
        privacyPolicyVersion: '1.0.0',
        termsOfUseAccepted: true,
        termsOfUseVersion: '1.0.0',
      },
    ],
  },
);
export type UserPatch = Static<typeof UserPatch>;

const READ_ONLY_FIELDS: ReadonlySet<string> = new Set([
  '_id',
  'email',
  'roles',
  'followersCount',
  'followingCount',
  'minutePriceInLiveStream',
  'creditBalance',
  'lastLogin',
  'lastUsernameChangeDate',
  'isRegistrationComplete',
  'signupSource',
  'signupCampaign',
  'createdAt',
  'updatedAt',
  'accountDeletionStatus',
  'accountDeletionRequestedAt',
  'accountDeletionScheduledFor',
  'accountDeletionCancelledAt',
  'accountDeletionFinalizedAt',
]);

/**
 * What the rules read of the stored user: every client-settable field (to tell a change from a no-op)
 * and the flags they depend on. A users row satisfies it.
 */
export interface ProfileSubject {
  name: string | null;
  surname: string | null;
  username: string | null;
  lastUsernameChangeDate: Date | null;
  isRegistrationComplete: boolean;
  countryCode: string | null;
  phoneNumber: string | null;
  birthDate: Date | null;
  gender: string | null;
  availabilityStatus: string | null;
  interests: string[];
  expertise: string | null;
  bio: string | null;
  instagram: string | null;
  x: string | null;
  tiktok: string | null;
  snapchat: string | null;
  facebook: string | null;
  profilePhoto: string | null;
  timezone: string | null;
  privacyPolicyAccepted: boolean;
  privacyPolicyVersion: string | null;
  termsOfUseAccepted: boolean;
  termsOfUseVersion: string | null;
  consentFormAccepted: boolean;
  consentFormVersion: string | null;
}

/** The policy versions in force, from configuration; no consent form is in use when its version is null. */
export interface CurrentPolicies {
  privacyPolicyVersion: string;
  termsOfUseVersion: string;
  consentFormVersion: string | null;
}

export interface ProfileContext {
  current: ProfileSubject;
  now: Date;
  policies: CurrentPolicies;
  /** MIN_AGE, in years. */
  minAge: number;
  /** USERNAME_CHANGE_COOLDOWN, in seconds. */
  usernameChangeCooldownSeconds: number;
}

type ProfileEventType = 'username_changed' | 'profile_updated' | 'policy_accepted' | 'consent_withdrawn';

interface ProfileEvent {
  type: ProfileEventType;
  details?: Record<string, string>;
}

/** Column values to write: only the fields whose value changes. */
type ProfileChanges = Partial<ProfileSubject>;

export type ProfilePlan =
  | { ok: true; changes: ProfileChanges; events: ProfileEvent[]; completesRegistration: boolean }
  | { ok: false; status: 400 | 409; details: string[] };

type Parsed<T> = { ok: true; value: T } | { ok: false; detail: string };
const accept = <T>(value: T): Parsed<T> => ({ ok: true, value });
const reject = (detail: string): Parsed<never> => ({ ok: false, detail });

// Limits count characters as a reader does: code points, as JSON Schema's maxLength does, of the
// text in Unicode normalization form C, so that é is one character however it was typed. The text is
// stored as sent: NFC would also replace CJK compatibility ideographs (神 U+FA19) people chose.
const characters = (value: string) => [...value.normalize('NFC')].length;
// \p{Cc}: U+0000–U+001F and U+007F–U+009F.
const CONTROL_CHARACTER = /\p{Cc}/u;
const CONTROL_CHARACTER_BUT_LINES = /[\p{Cc}--[\t\n\r]]/v;
// The schema's ONE_LINE: control characters, line and paragraph separators, bidirectional controls.
const NOT_IN_ONE_LINE = /[\p{Cc}\p{Zl}\p{Zp}\u202a-\u202e\u2066-\u2069]/u;
// What shows nothing on its own: format characters (zero-width ones), spaces, combining marks, and
// the fillers that are letters in name only (Hangul fillers, the blank braille pattern).
const VISIBLE = /[^\p{Cf}\p{Z}\p{M}\u115f\u1160\u3164\uffa0\u2800]/u;

/** A string as stored: trimmed, and well-formed (a lone surrogate would be stored as U+FFFD, not as sent). */
function nullableString(field: string, raw: unknown, check: (value: string) => Parsed<string | null>) {
  if (raw === null) return accept(null);
  if (typeof raw !== 'string') return reject(`${field} must be a string or null`);
  if (!raw.isWellFormed()) return reject(`${field} must not contain a lone surrogate`);
  return check(raw.trim());
}

/** A line of text as a person reads it: something visible, nothing that breaks the line or turns it. */
function oneLine(field: string, value: string): Parsed<string> {
  if (!VISIBLE.test(value)) return reject(`${field} must contain a visible character`);
  if (NOT_IN_ONE_LINE.test(value)) {
    return reject(`${field} must not contain control characters, line separators or bidirectional controls`);
  }
  return accept(value);
}

const personName = (field: 'name' | 'surname') => (raw: unknown) =>
  nullableString(field, raw, (value) => {
    if (characters(value) < 1 || characters(value) > NAME_MAX) {
      return reject(`${field} must be 1–${NAME_MAX} characters`);
    }
    return oneLine(field, value);
  });

const parseUsername = (raw: unknown) =>
  nullableString('username', raw, (trimmed) => {
    const value = trimmed.toLowerCase();
    if (value.length < USERNAME_MIN || value.length > USERNAME_MAX) {
      return reject(`username must be ${USERNAME_MIN}–${USERNAME_MAX} characters`);
    }
    if (!/^[a-z0-9._]+$/.test(value)) return reject('username may contain only a–z, 0–9, . and _');
    if (value.startsWith('.') || value.endsWith('.')) return reject('username must not start or end with .');
    return accept(value);
  });

const digits = (field: string, min: number, max: number, hint: string) => (raw: unknown) =>
  nullableString(field, raw, (value) =>
    new RegExp(`^[0-9]{${min},${max}}$`).test(value) ? accept(value) : reject(`${field} must be ${hint}`),
  );

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 date-time (the ISO 8601 profile JSON Schema's `date-time` means), rejecting impossible dates. */
function parseDateTime(value: string): Date | undefined {
  const match = DATE_TIME.exec(value);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (!isCalendarTime(year, month, day, hour, minute, second)) return undefined;
  const time = Date.parse(value);
  return Number.isNaN(time) ? undefined : new Date(time);
}

function yearsAfter(date: Date, years: number): Date {
  const later = new Date(date.getTime());
  later.setUTCFullYear(later.getUTCFullYear() + years);
  return later;
}

const parseBirthDate = (raw: unknown, { now, minAge }: ProfileContext): Parsed<Date | null> => {
  if (raw === null) return accept(null);
  const date = typeof raw === 'string' ? parseDateTime(raw.trim()) : undefined;
  if (date === undefined) {
    return reject('birthDate must be an ISO 8601 date-time such as 2000-01-31T00:00:00.000Z');
  }
  if (date.getTime() >= now.getTime()) return reject('birthDate must be in the past');
  if (yearsAfter(date, minAge).getTime() > now.getTime()) {
    return reject(`birthDate must be at least ${minAge} years ago`);
  }
  // Age in completed years at most MAX_AGE: the (MAX_AGE + 1)th birthday is still ahead.
  if (yearsAfter(date, MAX_AGE + 1).getTime() <= now.getTime()) {
    return reject(`birthDate must be at most ${MAX_AGE} years ago`);
  }
  return accept(date);
};

const oneOf = (field: string, allowed: readonly string[]) => (raw: unknown) =>
  nullableString(field, raw, (value) =>
    allowed.includes(value) ? accept(value) : reject(`${field} must be one of ${allowed.join(', ')}`),
  );

const parseInterests = (raw: unknown): Parsed<string[]> => {
  if (raw === null) return accept([]);
  if (!Array.isArray(raw) || !raw.every((item) => typeof item === 'string')) {
    return reject('interests must be an array of strings or null');
  }
  const byKey = new Map<string, string>();
  for (const item of raw as string[]) {
    const parsed = nullableString('interests entries', item, (value) =>
      characters(value) < 1 || characters(value) > INTEREST_MAX
        ? reject(`interests entries must be 1–${INTEREST_MAX} characters`)
        : oneLine('interests entries', value),
    );
    if (!parsed.ok) return parsed;
    const value = parsed.value as string;
    const key = value.normalize('NFC').toLowerCase();
    if (!byKey.has(key)) byKey.set(key, value);
  }
  if (byKey.size > INTERESTS_MAX)
    return reject(`interests must have at most ${INTERESTS_MAX} distinct entries`);
  return accept([...byKey.values()]);
};

const freeText = (field: string, max: number) => (raw: unknown) =>
  nullableString(field, raw, (value) => {
    if (characters(value) > max) return reject(`${field} must be at most ${max} characters`);
    if (CONTROL_CHARACTER_BUT_LINES.test(value))
      return reject(`${field} must not contain control characters other than tabs and line breaks`);
    return accept(value === '' ? null : value);
  });

const handle = (field: string) => (raw: unknown) =>
  nullableString(field, raw, (value) => {
    const name = value.startsWith('@') ? value.slice(1) : value;
    if (/[/:]/.test(name) || /^www\./i.test(name)) {
      return reject(`${field} must be a handle such as ayse.yilmaz, not a URL`);
    }
    if (!new RegExp(`^[A-Za-z0-9._]{1,${HANDLE_MAX}}$`).test(name)) {
      return reject(`${field} must be 1–${HANDLE_MAX} of A–Z, a–z, 0–9, . and _`);
    }
    return accept(name);
  });

// The special-use names of RFC 6761, RFC 7686 and RFC 8375, and the suffixes local networks and
// clusters use by convention. A first filter: a public name may resolve to a private address (README).
const LOCAL_NAME =
  /(^|\.)(localhost|localdomain|local|test|example|invalid|onion|internal|intranet|corp|private|lan|home|svc|home\.arpa)\.?$/i;

/** A host name with a dot in it (no single label a resolver completes) that names no local host. */
const isPublicHostName = (hostname: string) =>
  isIP(hostname.replace(/^\[|\]$/g, '')) === 0 && /\.[^.]/.test(hostname) && !LOCAL_NAME.test(hostname);

const parseProfilePhoto = (raw: unknown) =>
  nullableString('profilePhoto', raw, (value) => {
    if (characters(value) > PHOTO_URL_MAX) {
      return reject(`profilePhoto must be at most ${PHOTO_URL_MAX} characters`);
    }
    const url = URL.parse(value);
    // URL.parse would read https:///a.jpg as host a.jpg: the host must follow the slashes as written.
    if (
      !/^https:\/\/[^/?#\s]/.test(value) ||
      /\s/.test(value) ||
      CONTROL_CHARACTER.test(value) ||
      url === null ||
      url.hostname === ''
    ) {
      return reject('profilePhoto must be an https:// URL');
    }
    // Credentials in a URL that every viewer of the profile is shown would leak.
    if (url.username !== '' || url.password !== '') return reject('profilePhoto must not carry credentials');
    // A photo is on the internet: an address, localhost or a name of the local network, fetched by a
    // server that shows or checks photos, would reach that server's own network (SSRF). A first
    // filter: such a server must still refuse what a name resolves to in private ranges.
    if (!isPublicHostName(url.hostname))
      return reject('profilePhoto must be on a public host name, not an IP address or a local name');
    // Stored as checked: what other parsers read of `https://a.com\b@c.com` differs from what a browser does.
    if (characters(url.href) > PHOTO_URL_MAX) {
      return reject(`profilePhoto must be at most ${PHOTO_URL_MAX} characters`);
    }
    return accept(url.href);
  });

const LISTED_TIME_ZONES = new Map(
  Intl.supportedValuesOf('timeZone').map((zone) => [zone.toLowerCase(), zone]),
);

/**
 * The zone's name as stored, or undefined when the runtime does not know it. Listed names get the
 * runtime's spelling; aliases it accepts but does not list (UTC, Etc/UTC, Asia/Kolkata, US/Eastern)
 * are kept as sent, since its canonical choice for them varies across ICU versions (Asia/Calcutta),
 * but one in lower case (us/eastern), which is no tzdb name, becomes the zone it names.
 */
function knownTimeZone(name: string): string | undefined {
  const listed = LISTED_TIME_ZONES.get(name.toLowerCase());
  if (listed !== undefined) return listed;
  if (name.length > TIME_ZONE_MAX || !new RegExp(TIME_ZONE_PATTERN).test(name)) return undefined;
  try {
    const resolved = new Intl.DateTimeFormat('en', { timeZone: name }).resolvedOptions().timeZone;
    return resolved.toLowerCase() === name.toLowerCase() || name === name.toLowerCase() ? resolved : name;
  } catch {
    return undefined;
  }
}

const parseTimezone = (raw: unknown) =>
  nullableString('timezone', raw, (value) => {
    const zone = knownTimeZone(value);
    return zone === undefined
      ? reject('timezone must be an IANA time zone name such as Europe/Istanbul')
      : accept(zone);
  });

type PlainField = Exclude<
  keyof ProfileSubject,
  | 'lastUsernameChangeDate'
  | 'isRegistrationComplete'
  | 'privacyPolicyAccepted'
  | 'privacyPolicyVersion'
  | 'termsOfUseAccepted'
  | 'termsOfUseVersion'
  | 'consentFormAccepted'
  | 'consentFormVersion'
>;

const PLAIN_FIELDS: {
  [K in PlainField]: (raw: unknown, context: ProfileContext) => Parsed<ProfileSubject[K]>;
} = {
  name: personName('name'),
  surname: personName('surname'),
  username: parseUsername,
  countryCode: digits('countryCode', 1, 3, '1–3 digits without + (such as 90)'),
  phoneNumber: digits('phoneNumber', 4, 14, '4–14 digits'),
  birthDate: parseBirthDate,
  gender: oneOf('gender', GENDERS),
  availabilityStatus: oneOf('availabilityStatus', AVAILABILITY_STATUSES),
  interests: parseInterests,
  expertise: freeText('expertise', EXPERTISE_MAX),
  bio: freeText('bio', BIO_MAX),
  instagram: handle('instagram'),
  x: handle('x'),
  tiktok: handle('tiktok'),
  snapchat: handle('snapchat'),
  facebook: handle('facebook'),
  profilePhoto: parseProfilePhoto,
  timezone: parseTimezone,
};
const PLAIN_FIELD_NAMES = Object.keys(PLAIN_FIELDS) as PlainField[];
const SETTABLE_FIELDS: ReadonlySet<string> = new Set(Object.keys(UserPatch.properties));
// Once registration is complete, these may change but not be cleared.
const REQUIRED_FIELDS = ['name', 'surname', 'username'] as const;

type Body = Record<string, unknown>;

/** A body that is a JSON object, the one shape a profile update has. */
export const isJsonObject = (value: unknown): value is Body =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const has = (body: Body, field: string) => Object.hasOwn(body, field);
const FIELD_NAME_SHOWN = 64;
const shown = (field: string) =>
  field.length > FIELD_NAME_SHOWN ? `${field.slice(0, FIELD_NAME_SHOWN)}…` : field;

function sameValue(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  // A date as the client sends it back, against the stored one.
  if (typeof a === 'string' && b instanceof Date) return Date.parse(a) === b.getTime();
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((item, i) => item === b[i]);
  return a === b;
}

type PolicyName = 'privacyPolicy' | 'termsOfUse';

const isVersion = (raw: unknown, version: string | null) =>
  version !== null && typeof raw === 'string' && raw.trim() === version;

const isAcceptedNow = (accepted: boolean, version: string | null, currentVersion: string) =>
  accepted && version === currentVersion;

const policyAccepted = (policy: PolicyName | 'consentForm', version: string): ProfileEvent => ({
  type: 'policy_accepted',
  details: { policy, version },
});

/** A policy that can only be accepted here: `<policy>Accepted: true` with the current `<policy>Version`. */
function checkAcceptance(
  body: Body,
  policy: PolicyName,
  currentVersion: string,
  problems: string[],
): boolean {
  const acceptedField = `${policy}Accepted`;
  const versionField = `${policy}Version`;
  if (!has(body, acceptedField) && !has(body, versionField)) return false;
  let valid = true;
  if (!has(body, acceptedField)) {
    problems.push(`${acceptedField} must be sent together with ${versionField}`);
    valid = false;
  } else if (body[acceptedField] !== true) {
    problems.push(`${acceptedField} must be true (acceptance is withdrawn by deleting the account)`);
    valid = false;
  }
  if (!has(body, versionField)) {
    problems.push(`${versionField} must be sent together with ${acceptedField}`);
    valid = false;
  } else if (!isVersion(body[versionField], currentVersion)) {
    problems.push(`${versionField} must be the current version ${currentVersion}`);
    valid = false;
  }
  return valid;
}

type ConsentDecision = 'accept' | 'withdraw' | undefined;

function checkConsent(body: Body, context: ProfileContext, problems: string[]): ConsentDecision {
  const current = context.policies.consentFormVersion;
  const sentVersion = has(body, 'consentFormVersion');
  if (!has(body, 'consentFormAccepted')) {
    if (sentVersion) problems.push('consentFormAccepted must be sent together with consentFormVersion');
    return undefined;
  }
  const accepted = body.consentFormAccepted;
  if (accepted === true) {
    if (current === null) {
      problems.push('consentFormAccepted cannot be true: no consent form is in use');
      return undefined;
    }
    if (!sentVersion) {
      problems.push('consentFormVersion must be sent together with consentFormAccepted');
      return undefined;
    }
    if (!isVersion(body.consentFormVersion, current)) {
      problems.push(`consentFormVersion must be the current version ${current}`);
      return undefined;
    }
    return 'accept';
  }
  if (accepted === false) {
    const stored = context.current.consentFormVersion;
    if (
      sentVersion &&
      !isVersion(body.consentFormVersion, stored) &&
      !isVersion(body.consentFormVersion, current)
    ) {
      problems.push('consentFormVersion must be left out or be the version being withdrawn');
      return undefined;
    }
    return 'withdraw';
  }
  problems.push('consentFormAccepted must be true or false');
  return undefined;
}

/**
 * The rules of `PATCH /api/v1/users/me` (API.md §8.9) applied to a request body: either the columns
 * to write, the security events to record and whether this completes registration, or every failing
 * field's detail (400; a 409 only for the username cooldown, and only when nothing is a 400).
 * Username uniqueness is left to the database.
 */
export function planProfileUpdate(body: Body, context: ProfileContext): ProfilePlan {
  const { current, now, policies } = context;
  const problems: string[] = [];
  const conflicts: string[] = [];

  for (const field of Object.keys(body)) {
    if (READ_ONLY_FIELDS.has(field)) problems.push(`${field} is read-only`);
    else if (!SETTABLE_FIELDS.has(field)) problems.push(`${shown(field)} is not a profile field`);
  }

  const sent: Partial<ProfileSubject> = {};
  const take = <K extends PlainField>(field: K) => {
    if (!has(body, field)) return;
    // A client that sends the whole profile back, as read, changes nothing: not even a value stored
    // before a rule it breaks existed, nor one the rules would write differently (a photo URL).
    if (sameValue(body[field], current[field])) {
      sent[field] = current[field];
      return;
    }
    const parsed = PLAIN_FIELDS[field](body[field], context);
    if (parsed.ok) sent[field] = parsed.value;
    else problems.push(parsed.detail);
  };
  for (const field of PLAIN_FIELD_NAMES) take(field);

  // Both in the same patch: a lone half would pair a new number with a stale calling code.
  if (has(body, 'countryCode') !== has(body, 'phoneNumber')) {
    const [given, missing] = has(body, 'countryCode')
      ? ['countryCode', 'phoneNumber']
      : ['phoneNumber', 'countryCode'];
    problems.push(`${missing} must be sent together with ${given} (both null clears the phone number)`);
  } else if (
    sent.countryCode !== undefined &&
    sent.phoneNumber !== undefined &&
    !(sent.countryCode === current.countryCode && sent.phoneNumber === current.phoneNumber)
  ) {
    if ((sent.countryCode === null) !== (sent.phoneNumber === null)) {
      problems.push('countryCode and phoneNumber must both be set or both be null');
    } else if (sent.countryCode !== null && sent.phoneNumber !== null) {
      if (sent.countryCode.length + sent.phoneNumber.length > PHONE_MAX_DIGITS) {
        problems.push(`phoneNumber and countryCode together must be at most ${PHONE_MAX_DIGITS} digits`);
      }
    }
  }

  if (current.isRegistrationComplete) {
    for (const field of REQUIRED_FIELDS) {
      if (sent[field] === null) problems.push(`${field} cannot be cleared once registration is complete`);
    }
  }

  const privacyAccepted = checkAcceptance(body, 'privacyPolicy', policies.privacyPolicyVersion, problems);
  const termsAccepted = checkAcceptance(body, 'termsOfUse', policies.termsOfUseVersion, problems);
  const consent = checkConsent(body, context, problems);

  const changes: ProfileChanges = {};
  const write = <K extends PlainField>(field: K) => {
    const value = sent[field];
    if (value !== undefined && !sameValue(value, current[field])) changes[field] = value;
  };
  for (const field of PLAIN_FIELD_NAMES) write(field);

  // Clearing it is a change too: cleared within the cooldown, it could not be set again until the
  // cooldown ends, and the registration it is required for could not complete. It starts none.
  if (changes.username !== undefined) {
    const last = current.lastUsernameChangeDate;
    // At the latest the last time a Date holds: a change stored as `infinity` (by hand) allows none.
    const allowedFrom =
      last && new Date(Math.min(last.getTime() + context.usernameChangeCooldownSeconds * 1000, LAST_TIME));
    if (allowedFrom && now.getTime() < allowedFrom.getTime()) {
      conflicts.push(`username can be changed again at ${allowedFrom.toISOString()}`);
    }
    if (changes.username !== null) changes.lastUsernameChangeDate = now;
  }

  if (problems.length > 0) return { ok: false, status: 400, details: problems };
  if (conflicts.length > 0) return { ok: false, status: 409, details: conflicts };

  const policyEvents: ProfileEvent[] = [];
  const accepted = [
    [
      'privacyPolicy',
      privacyAccepted,
      'privacyPolicyAccepted',
      'privacyPolicyVersion',
      policies.privacyPolicyVersion,
    ],
    ['termsOfUse', termsAccepted, 'termsOfUseAccepted', 'termsOfUseVersion', policies.termsOfUseVersion],
  ] as const;
  for (const [policy, accepting, acceptedField, versionField, version] of accepted) {
    if (!accepting || isAcceptedNow(current[acceptedField], current[versionField], version)) continue;
    changes[acceptedField] = true;
    changes[versionField] = version;
    policyEvents.push(policyAccepted(policy, version));
  }
  const consentVersion = policies.consentFormVersion;
  if (consent === 'accept' && consentVersion !== null) {
    if (!isAcceptedNow(current.consentFormAccepted, current.consentFormVersion, consentVersion)) {
      changes.consentFormAccepted = true;
      changes.consentFormVersion = consentVersion;
      policyEvents.push(policyAccepted('consentForm', consentVersion));
    }
  } else if (consent === 'withdraw' && current.consentFormAccepted) {
    changes.consentFormAccepted = false;
    const withdrawn: Record<string, string> = { policy: 'consentForm' };
    if (current.consentFormVersion !== null) withdrawn.version = current.consentFormVersion;
    policyEvents.push({ type: 'consent_withdrawn', details: withdrawn });
  }

  const events: ProfileEvent[] = [];
  if ('username' in changes) events.push({ type: 'username_changed' });
  const updated = PLAIN_FIELD_NAMES.filter((field) => field !== 'username' && field in changes);
  if (updated.length > 0) events.push({ type: 'profile_updated', details: { fields: updated.join(',') } });
  events.push(...policyEvents);

  const completesRegistration =
    !current.isRegistrationComplete &&
    registrationStatus({ ...current, ...changes }, policies).isRegistrationComplete;
  if (completesRegistration) changes.isRegistrationComplete = true;

  return { ok: true, changes, events, completesRegistration };
}

export type RegistrationRequirement = 'name' | 'surname' | 'username' | 'privacyPolicy' | 'termsOfUse';

export type RegistrationSubject = Pick<
  ProfileSubject,
  | 'name'
  | 'surname'
  | 'username'
  | 'privacyPolicyAccepted'
  | 'privacyPolicyVersion'
  | 'termsOfUseAccepted'
  | 'termsOfUseVersion'
>;

export interface RegistrationStatus {
  isRegistrationComplete: boolean;
  missing: RegistrationRequirement[];
  policies: CurrentPolicies;
}

/** What the client must still show (API.md §8.10), evaluated now against the current versions. */
export function registrationStatus(user: RegistrationSubject, policies: CurrentPolicies): RegistrationStatus {
  const satisfied: Record<RegistrationRequirement, boolean> = {
    name: Boolean(user.name),
    surname: Boolean(user.surname),
    username: Boolean(user.username),
    privacyPolicy: isAcceptedNow(
      user.privacyPolicyAccepted,
      user.privacyPolicyVersion,
      policies.privacyPolicyVersion,
    ),
    termsOfUse: isAcceptedNow(user.termsOfUseAccepted, user.termsOfUseVersion, policies.termsOfUseVersion),
  };
  const missing = (Object.keys(satisfied) as RegistrationRequirement[]).filter(
    (requirement) => !satisfied[requirement],
  );
  return {
    isRegistrationComplete: missing.length === 0,
    missing,
    policies: {
      privacyPolicyVersion: policies.privacyPolicyVersion,
      termsOfUseVersion: policies.termsOfUseVersion,
      consentFormVersion: policies.consentFormVersion,
    },
  };
}
