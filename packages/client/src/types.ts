import type { paths } from './api.generated.ts';

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
export type SendCodeResult = ResponseData<'/api/v1/auth/send-otp-email', 'post'>;
export type VerifyCodeBody = RequestBody<'/api/v1/auth/verify-otp-email', 'post'>;
/** Where a new account came from; stored only when this sign-in creates the user. */
export type SignupDetails = Pick<VerifyCodeBody, 'signupSource' | 'signupCampaign'>;
/** The `data` of a successful code verification: tokens, the user and whether registration is complete now. */
export type LoginResult = ResponseData<'/api/v1/auth/verify-otp-email', 'post'>;
export type User = ResponseData<'/api/v1/users/me', 'get'>;
/** A new access token and a rotated refresh token, with their lifetimes in seconds. */
export type TokenPair = ResponseData<'/api/v1/auth/refresh-token', 'post'>;
export type RefreshBody = RequestBody<'/api/v1/auth/refresh-token', 'post'>;
export type RevokeTokenBody = RequestBody<'/api/v1/auth/revoke-token', 'post'>;
export type RevokeTokenResult = ResponseData<'/api/v1/auth/revoke-token', 'post'>;
export type LogoutResult = ResponseData<'/api/v1/auth/logout', 'post'>;

type SessionsPage = ResponseData<'/api/v1/auth/sessions', 'get'>;
/** One of the user's active sessions (`current`: the session of this client's access token). */
export type Session = SessionsPage['list'][number];
export type EndSessionResult = ResponseData<'/api/v1/auth/sessions/{id}', 'delete'>;
export type Pagination = SessionsPage['pagination'];
/** The `data` of every paginated route. */
export interface Page<Item> {
  list: Item[];
  pagination: Pagination;
}
/** `page` (from 1) and `limit` (1..100); the server's defaults (1 and 10) when absent. */
export type PageQuery = Partial<Operation<'/api/v1/auth/sessions', 'get'>['parameters']['query']>;

/** A partial profile update: an absent field is left alone, `null` clears an optional one. */
export type UserPatch = RequestBody<'/api/v1/users/me', 'patch'>;
/** What the client must still show before the registration is complete, and the current policy versions. */
export type Registration = ResponseData<'/api/v1/users/me/registration', 'get'>;
export type SecurityEvent = ResponseData<'/api/v1/users/me/security-events', 'get'>['list'][number];
export type SecurityEventType = SecurityEvent['type'];
