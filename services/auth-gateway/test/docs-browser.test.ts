import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { signIn, startGateway, type TestGateway } from './helpers.ts';

// The API console at /docs as an app developer uses it, in Debian's Chromium: the access token
// pasted without the `Bearer ` prefix, then GET /users/me executed from the page.

let gateway: TestGateway;
let baseURL: string;
let browser: Browser;

beforeAll(async () => {
  gateway = await startGateway();
  baseURL = await gateway.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
});

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
});

it('takes the access token alone in "Authorize", and "Try it out" of GET /users/me answers 200', async () => {
  const { accessToken } = await signIn(gateway.app, 'docs.reader@example.com');
  const page = await browser.newPage({ baseURL });
  page.setDefaultTimeout(8_000);
  const refused: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/.test(message.text())) refused.push(message.text());
  });
  await page.goto('/docs');

  await page.getByRole('button', { name: 'Authorize' }).first().click();
  const dialog = page.locator('.modal-ux');
  await dialog.getByRole('textbox', { name: 'auth-bearer-value' }).fill(accessToken);
  await dialog.getByRole('button', { name: 'Apply credentials' }).click();
  await dialog.getByRole('button', { name: 'Close' }).click();

  const operation = page.locator('.opblock-get:has(.opblock-summary-path[data-path="/api/v1/users/me"])');
  await operation.locator('.opblock-summary').first().click();
  // "Try it out" is on from the start (the console is configured so): Execute is there at once.
  await operation.getByRole('button', { name: 'Execute' }).click();
  const status = operation.locator('.live-responses-table tbody .response-col_status').first();
  await expect.poll(() => status.innerText()).toBe('200');
  expect(await operation.locator('.live-responses-table').innerText()).toContain('docs.reader@example.com');
  expect(refused).toEqual([]);
});
