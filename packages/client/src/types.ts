import type { components, paths } from './api.generated.ts';

/** The shapes the OpenAPI document names (`components.schemas`), by name. */
type Schemas = components['schemas'];

/** Every route of the gateway, by path, as the OpenAPI document describes it. */
export type Path = keyof paths;
type Method = 'get' | 'post' | 'patch' | 'delete';
type Operation<P extends Path, M extends Method> = NonNullable<paths[P][M]>;
type Json<T> = T extends { content: { 'application/json': infer Body } } ? Body : never;

/** The `data` of an operation's 200 envelope. */
export type ResponseData<P extends Path, M extends Method> =
  Operation<P, M> extends { responses: { 200: infer Ok } }
    ? Json<Ok> extends { data: infer Data }
      ? Data
      : never
    : never;

/** The JSON body an operation takes. */
export type RequestBody<P extends Path, M extends Method> =
  Operation<P, M> extends { requestBody: infer Body } ? Json<Body> : never;

/** `POST /api/v1/auth/send-otp-email`: `code` only in development and test. */
export type SendCodeResult = Schemas['SendCodeResult'];
export type VerifyCodeBody = Schemas['VerifyCodeBody'];
/** Where a new account came from; stored only when this sign-in creates the user. */
export type SignupDetails = Pick<VerifyCodeBody, 'signupSource' | 'signupCampaign'>;
/** The `data` of a successful code verification: tokens, the user and whether registration is complete now. */
export type LoginResult = Schemas['LoginResult'];
export type User = Schemas['User'];
/** A new access token and a rotated refresh token, with their lifetimes in seconds. */
export type TokenPair = Schemas['TokenPair'];
export type RefreshBody = Schemas['RefreshTokenBody'];
export type RevokeTokenBody = Schemas['RefreshTokenBody'];
export type RevokeTokenResult = Schemas['RevokedSession'];
export type LogoutResult = Schemas['LogoutResult'];

/** One of the user's active sessions (`current`: the session of this client's access token). */
export type Session = Schemas['Session'];
export type EndSessionResult = Schemas['RevokedSession'];
export type Pagination = Schemas['Pagination'];
/** The `data` of every paginated route. */
export interface Page<Item> {
  list: Item[];
  pagination: Pagination;
}
/** `page` (from 1) and `limit` (1..100); the server's defaults (1 and 10) when absent. */
export type PageQuery = Partial<Operation<'/api/v1/auth/sessions', 'get'>['parameters']['query']>;

/** A partial profile update: an absent field is left alone, `null` clears an optional one. */
export type UserPatch = Schemas['UserPatch'];
/** What the client must still show before the registration is complete, and the current policy versions. */
export type Registration = Schemas['RegistrationStatus'];
export type SecurityEvent = Schemas['SecurityEvent'];
export type SecurityEventType = Schemas['SecurityEventType'];
