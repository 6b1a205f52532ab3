const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * The claims of a JWT, read without verifying it (the server does that): the client only uses them to
 * know its own session. Undefined when the token is not a JWT with a JSON payload.
 */
export function readClaims(token: string): Record<string, unknown> | undefined {
  const payload = token.split('.')[1];
  if (payload === undefined) return undefined;
  // base64url to percent-encoded bytes, so decodeURIComponent turns the UTF-8 into text (no atob needed).
  let bits = 0;
  let buffer = 0;
  let encoded = '';
  for (const char of payload) {
    const index = BASE64URL.indexOf(char);
    if (index < 0) return undefined;
    buffer = ((buffer << 6) | index) & 0xffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      encoded += `%${((buffer >> bits) & 0xff).toString(16).padStart(2, '0')}`;
    }
  }
  try {
    const claims: unknown = JSON.parse(decodeURIComponent(encoded));
    return typeof claims === 'object' && claims !== null && !Array.isArray(claims)
      ? (claims as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The `sid` claim: the `_id` of the session the access token belongs to. */
export function sessionIdOf(accessToken: string): string | undefined {
  const sid = readClaims(accessToken)?.sid;
  return typeof sid === 'string' ? sid : undefined;
}
