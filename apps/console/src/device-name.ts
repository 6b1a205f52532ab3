const BROWSERS: [RegExp, string][] = [
  // Order matters: Edge and Opera also say "Chrome", Chrome also says "Safari".
  [/\bEdg(?:e|A|iOS)?\//, 'Edge'],
  [/\b(?:OPR|Opera)\//, 'Opera'],
  [/\bSamsungBrowser\//, 'Samsung Internet'],
  [/\bFirefox\/|\bFxiOS\//, 'Firefox'],
  [/\b(?:Headless)?Chrom(?:e|ium)\/|\bCriOS\//, 'Chrome'],
  [/\bVersion\/[\d.]+.*\bSafari\//, 'Safari'],
];

const SYSTEMS: [RegExp, string][] = [
  [/\biPhone\b/, 'iPhone'],
  [/\biPad\b/, 'iPad'],
  [/\bAndroid\b/, 'Android'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bLinux\b/, 'Linux'],
];

/**
 * A program that is not a browser names itself first: `curl/8.5.0`, `okhttp/4.12`, `node`. A short
 * word only: anyone who knows an address records a User-Agent of his choosing in that account's
 * security activity (a wrong code), and a long one could read as a message there.
 */
const PROGRAM = /^([A-Za-z][\w.-]{0,23})(?:[/\s]|$)/;

/**
 * A short, human name for the device a session was started on ("Chrome on Windows"), from the
 * User-Agent the gateway recorded. Only the browser and the system, never a version: that is what a
 * person recognizes, and what stays true across updates.
 */
export function deviceName(userAgent: string | null | undefined): string {
  const agent = userAgent?.trim() ?? '';
  if (agent === '') return 'Unknown device';
  const browser = BROWSERS.find(([pattern]) => pattern.test(agent))?.[1];
  const system = SYSTEMS.find(([pattern]) => pattern.test(agent))?.[1];
  if (browser && system) return `${browser} on ${system}`;
  if (browser) return browser;
  if (system) return `Browser on ${system}`;
  return PROGRAM.exec(agent)?.[1] ?? 'Unknown device';
}
