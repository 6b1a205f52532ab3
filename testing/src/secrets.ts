/**
 * Whether a one-time code appears in `text` the way a leak would show it: on its own (in quotes,
 * after `=` or a space), not as four digits inside a longer token. Trace and job ids (hex), sealed
 * codes (base64) and numbers hold any four digits by chance now and then.
 */
export function mentionsCode(text: string, code: string): boolean {
  return new RegExp(`(?<![0-9A-Za-z+/_-])${code}(?![0-9A-Za-z+/_-])`).test(text);
}
