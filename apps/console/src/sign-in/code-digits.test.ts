import { describe, expect, it } from 'vitest';
import { codeDigits } from './code-digits.ts';

describe('codeDigits', () => {
  it('keeps the digits of a pasted code, whatever surrounds them', () => {
    expect(codeDigits(' 1234 ')).toBe('1234');
    expect(codeDigits('\t1234\n')).toBe('1234');
    expect(codeDigits('12 34')).toBe('1234');
    expect(codeDigits('0421')).toBe('0421');
  });

  it('keeps four digits at most, and nothing that is not one', () => {
    expect(codeDigits('123456')).toBe('1234');
    expect(codeDigits('12a')).toBe('12');
    expect(codeDigits('abc')).toBe('');
  });
});
