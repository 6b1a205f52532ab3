import { describe, expect, it } from 'vitest';
import { generateCode } from './sign-in.service.ts';

describe('generateCode', () => {
  it('draws from all 10,000 codes: four digits, every digit in every place', () => {
    const codes = Array.from({ length: 2000 }, generateCode);
    expect(codes.filter((code) => !/^\d{4}$/.test(code))).toEqual([]);
    for (const place of [0, 1, 2, 3]) expect(new Set(codes.map((code) => code[place])).size).toBe(10);
  });
});
