import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { composeDeletionCancelledEmail, composeDeletionScheduledEmail } from '../src/deletion-email.job.ts';
import { composeOtpEmail } from '../src/send-otp.job.ts';

// The emails' HTML as a mail client renders it, in Debian's Chromium, in a light and a dark scheme:
// every line of text must stand out from what lies under it.

let browser: Browser;
beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
});
afterAll(() => browser?.close());

const now = new Date('2026-11-22T09:05:00.000Z');
const ACCOUNT_PAGE = 'https://auth.acme.example/account/';
const EMAILS = {
  code: composeOtpEmail(
    { to: 'ada@example.com', code: '4826', expiresAt: '2026-11-22T09:10:00.000Z' },
    now,
    'Acme',
  ),
  'deletion scheduled': composeDeletionScheduledEmail(
    { to: 'ada@example.com', scheduledFor: '2026-12-22T09:05:00.000Z' },
    now,
    'Acme',
    ACCOUNT_PAGE,
  ),
  'deletion cancelled': composeDeletionCancelledEmail(
    { to: 'ada@example.com', cancelledAt: '2026-11-22T09:05:00.000Z' },
    'Acme',
    ACCOUNT_PAGE,
  ),
};

/** Each paragraph's and link's text, its colour, and the colour set under it (none: the client's canvas). */
type Painted = { text: string; color: string; background: string | null };

const luminance = (rgb: string) => {
  const [r, g, b] = (rgb.match(/[\d.]+/g) ?? []).slice(0, 3).map((value) => {
    const channel = Number(value) / 255;
    return channel <= 0.04045 ? channel / 12.92 : ((channel + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * (r ?? 0) + 0.7152 * (g ?? 0) + 0.0722 * (b ?? 0);
};
/** WCAG's contrast ratio of two CSS colours. */
const contrast = (a: string, b: string) => {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (light + 0.05) / (dark + 0.05);
};

for (const colorScheme of ['light', 'dark'] as const)
  for (const [name, email] of Object.entries(EMAILS))
    it(`shows every line of the ${name} email legibly in a ${colorScheme} scheme`, async () => {
      const page = await browser.newPage({ colorScheme, viewport: { width: 360, height: 640 } });
      try {
        await page.setContent(email.html);
        // In the page (a string: this package's types know no DOM).
        const painted = (await page.evaluate(`[...document.querySelectorAll('p, a')].map((paragraph) => {
          let background = null;
          for (let node = paragraph; node && !background; node = node.parentElement) {
            const color = getComputedStyle(node).backgroundColor;
            if (color !== 'rgba(0, 0, 0, 0)' && color !== 'transparent') background = color;
          }
          return { text: paragraph.textContent, color: getComputedStyle(paragraph).color, background };
        })`)) as Painted[];
        expect(painted.length).toBeGreaterThan(1);
        for (const { text, color, background } of painted) {
          // A colour of its own under every text: a client's dark canvas never meets the text's colour.
          expect(background, text).not.toBeNull();
          expect(contrast(color, background ?? color), text).toBeGreaterThanOrEqual(4.5);
        }
      } finally {
        await page.close();
      }
    });
