import { fileURLToPath } from 'node:url';
import { readmeSection } from '@tessera/config';
import { describe, expect, it } from 'vitest';
import { ERRORS } from './errors.ts';

/** The README's table of error codes: code, status, and the detail it sends or when it happens. */
function errorTable(): string {
  const rows = Object.entries(ERRORS).map(([code, entry]) => {
    const meaning = entry.detail ? `\`${entry.detail}\`` : 'when' in entry ? entry.when : '';
    return `| \`${code}\` | ${entry.status} | ${meaning.replaceAll('|', '\\|')} |`;
  });
  return ['| Code | Status | Detail, or when |', '| --- | --- | --- |', ...rows].join('\n');
}

describe('the error catalog', () => {
  it('says, for every code, what it sends or when it happens', () => {
    for (const [code, entry] of Object.entries(ERRORS))
      expect(entry.detail || ('when' in entry && entry.when), code).toBeTruthy();
  });

  it('is the README table of error codes (UPDATE_README=1 rewrites it)', () => {
    const readme = fileURLToPath(new URL('../../../README.md', import.meta.url));
    const table = errorTable();
    expect(readmeSection(readme, 'errors:gateway', process.env.UPDATE_README ? table : undefined)).toBe(
      table,
    );
  });
});
