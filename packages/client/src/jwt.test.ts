import { describe, expect, it } from 'vitest';
import { readClaims, sessionIdOf } from './jwt.ts';

const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const jwt = (claims: object) => `${base64url({ alg: 'EdDSA' })}.${base64url(claims)}.signature`;

describe('readClaims', () => {
  it('reads the payload of a JWT, UTF-8 included', () => {
    expect(readClaims(jwt({ sub: 'u1', sid: 's1', name: 'Ayşe Yılmaz 🙂' }))).toEqual({
      sub: 'u1',
      sid: 's1',
      name: 'Ayşe Yılmaz 🙂',
    });
    expect(sessionIdOf(jwt({ sid: '1b2c' }))).toBe('1b2c');
  });

  it('is undefined for anything that is not a JWT with a JSON object payload', () => {
    expect(readClaims('opaque')).toBeUndefined();
    expect(readClaims('a.b+c.d')).toBeUndefined();
    expect(readClaims(`x.${Buffer.from('[1]').toString('base64url')}.y`)).toBeUndefined();
    expect(sessionIdOf(jwt({ sid: 42 }))).toBeUndefined();
  });
});
