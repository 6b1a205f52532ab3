import { describe, expect, it } from 'vitest';
import { maskEmail } from './worker.ts';

describe('maskEmail', () => {
  it('keeps the first letter and the domain only', () => {
    expect(maskEmail('alice@example.com')).toBe('a***@example.com');
    expect(maskEmail('a@example.com')).toBe('a***@example.com');
  });

  it('masks by the last @, so a quoted local part does not leak', () => {
    expect(maskEmail('"bob@home"@example.com')).toBe('"***@example.com');
  });

  it('hides anything that is not an address entirely', () => {
    expect(maskEmail('not-an-address')).toBe('***');
    expect(maskEmail('@example.com')).toBe('***');
  });
});
