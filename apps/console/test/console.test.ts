import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMailWorker } from '@tessera/mailer';
import { loadConfig as loadMailerConfig } from '@tessera/mailer/config';
import { createTransport, type MailTransport } from '@tessera/mailer/transport';
import { type SmtpSink, startSmtpSink } from '@tessera/testing';
import type { AxeResults } from 'axe-core';
import pino from 'pino';
import {
  type Browser,
  type BrowserContext,
  chromium,
  type Locator,
  type Page,
  type Route,
} from 'playwright-core';
import { build } from 'vite';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
// The gateway's `db` decoration, to set up an account the API cannot make (an older policy accepted).
import type {} from '../../../services/auth-gateway/src/plugins/db.ts';
import { startGateway, type TestGateway } from '../../../services/auth-gateway/test/helpers.ts';

// The console as people use it: built by Vite, served by the real gateway, driven in Debian's
// Chromium; every code is read from the email the real mailer delivered to an SMTP server.
const CONSOLE = fileURLToPath(new URL('..', import.meta.url));
const SCREENSHOTS = fileURLToPath(new URL('../../../docs/screenshots/', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
/** Sends per address per hour: the fourth code for one address is refused (a 429 to show). */
const SENDS_PER_EMAIL = 3;

let buildDir: string;
let gateway: TestGateway;
let baseURL: string;
let sink: SmtpSink;
let transport: MailTransport;
let mailer: ReturnType<typeof createMailWorker>;
let browser: Browser;

beforeAll(async () => {
  buildDir = await mkdtemp(path.join(tmpdir(), 'tessera-console-build-'));
  sink = await startSmtpSink();
  await build({ root: CONSOLE, logLevel: 'warn', build: { outDir: buildDir, emptyOutDir: true } });
  gateway = await startGateway({
    CONSOLE_DIR: buildDir,
    CONSENT_FORM_VERSION: '1.0.0',
    // A deletion that comes due is erased within a second.
    ACCOUNT_DELETION_SWEEP_INTERVAL: '1',
    // A deletion may be scheduled again a second after it was cancelled.
    ACCOUNT_DELETION_REQUEST_COOLDOWN: '1',
    OTP_MAX_SENDS_PER_EMAIL_PER_HOUR: String(SENDS_PER_EMAIL),
  });
  baseURL = await gateway.app.listen({ port: 0, host: '127.0.0.1' });
  const mailerConfig = loadMailerConfig({
    APP_ENV: 'test',
    LOG_LEVEL: 'silent',
    REDIS_URL: gateway.config.redis.url,
    BULLMQ_PREFIX: gateway.config.mail.queuePrefix,
    SMTP_URL: sink.url,
    MAIL_FROM: 'Tessera <no-reply@tessera.test>',
  });
  transport = createTransport(mailerConfig);
  mailer = createMailWorker({ config: mailerConfig, transport, logger: pino({ level: 'silent' }) });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // Playwright gives every launch a new, empty profile (--user-data-dir) of its own.
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  await mailer?.close();
  transport?.close();
  await gateway?.close();
  await sink?.close();
  await rm(buildDir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// The person's side: a browser, their inbox.

const contexts: BrowserContext[] = [];
/** Uncaught errors and CSP refusals of every page, checked after each test. */
let pageProblems: string[] = [];

afterEach(async () => {
  await Promise.all(contexts.splice(0).map((context) => context.close()));
  const problems = pageProblems;
  pageProblems = [];
  expect(problems).toEqual([]);
});

async function newContext(viewport = { width: 900, height: 720 }, locale = 'en-US'): Promise<BrowserContext> {
  const context = await browser.newContext({
    baseURL,
    viewport,
    locale,
    timezoneId: 'UTC',
    colorScheme: 'light',
    reducedMotion: 'reduce',
  });
  // Well inside the test's own timeout, so that a wait that fails says which one it was.
  context.setDefaultTimeout(8_000);
  contexts.push(context);
  return context;
}

async function openConsole(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  page.on('pageerror', (error) => pageProblems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/.test(message.text())) pageProblems.push(message.text());
  });
  await page.goto('/account/');
  return page;
}

let people = 0;
const newEmail = (name: string) => `${name}.${++people}.${Date.now()}@example.com`;

const codeEmailsTo = (email: string) =>
  sink.messages.filter(
    (mail) => mail.to.includes(email) && /is your Tessera sign-in code$/.test(mail.subject),
  );

/** The code of the `index`-th code email to `email` (0 is the first), as the person reads it. */
async function codeFromEmail(email: string, index: number): Promise<string> {
  await sink.waitFor(() => codeEmailsTo(email).length > index);
  const subject = codeEmailsTo(email)[index]?.subject ?? '';
  const code = /^(\d{4}) is your Tessera sign-in code$/.exec(subject)?.[1];
  if (!code) throw new Error(`no code in "${subject}"`);
  return code;
}

/** A code that is not `code`. */
const wrong = (code: string) => String((Number(code) + 1) % 10_000).padStart(4, '0');

/** Signs in through the page; `index` is the number of code emails this address has had before. */
async function signInThroughPage(page: Page, email: string, index = codeEmailsTo(email).length) {
  await page.getByRole('textbox', { name: 'Email' }).fill(email);
  await page.getByRole('button', { name: 'Send code' }).click();
  await page.getByRole('textbox', { name: 'Code' }).fill(await codeFromEmail(email, index));
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Another sign-in of `email` through the API (an app, whose device is "node"): another session. */
async function signInThroughApi(email: string) {
  const index = codeEmailsTo(email).length;
  await api('POST', '/api/v1/auth/send-otp-email', { email });
  await api('POST', '/api/v1/auth/verify-otp-email', { email, code: await codeFromEmail(email, index) });
}

/** A person who signed up and registered elsewhere (an app using the API), whose code came by email. */
async function registeredPerson(name: string, surname: string) {
  const email = newEmail(name.toLowerCase());
  const index = codeEmailsTo(email).length;
  await api('POST', '/api/v1/auth/send-otp-email', { email });
  const login = await api('POST', '/api/v1/auth/verify-otp-email', {
    email,
    code: await codeFromEmail(email, index),
  });
  const accessToken = login.accessToken as string;
  const username = `${name.toLowerCase()}_${people}`;
  await api(
    'PATCH',
    '/api/v1/users/me',
    {
      name,
      surname,
      username,
      privacyPolicyAccepted: true,
      privacyPolicyVersion: '1.0.0',
      termsOfUseAccepted: true,
      termsOfUseVersion: '1.0.0',
    },
    accessToken,
  );
  return { email, accessToken, username };
}

// biome-ignore lint/suspicious/noExplicitAny: the envelope's data, read field by field
async function api(method: string, route: string, payload?: unknown, accessToken?: string): Promise<any> {
  const response = await fetch(`${baseURL}${route}`, {
    method,
    headers: {
      ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
      ...(accessToken ? { authorization: `Bearer ${accessToken}` } : {}),
    },
    body: payload === undefined ? undefined : JSON.stringify(payload),
  });
  const envelope = (await response.json()) as { data: unknown; errors: string[] };
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${envelope.errors.join('; ')}`);
  return envelope.data;
}

// ---------------------------------------------------------------------------------------------
// What is checked on every view.

/** axe-core in the page (evaluated, so the page's CSP stays as served): no serious or critical violation. */
async function expectAccessible(page: Page, view: string) {
  await page.evaluate(AXE);
  const { violations } = await page.evaluate(() =>
    (window as unknown as { axe: { run(): Promise<AxeResults> } }).axe.run(),
  );
  const serious = violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map(({ id, impact, nodes }) => ({ id, impact, nodes: nodes.map((node) => node.target.join(' ')) }));
  expect(serious, `${view}: accessibility violations`).toEqual([]);
}

/** Nothing wider than the window (no sideways scrolling), as at 360 px on a phone. */
async function expectNoSidewaysScroll(page: Page) {
  const overflowing = await page.evaluate(() =>
    [...document.querySelectorAll('body *')]
      .filter((element) => element.getBoundingClientRect().right > window.innerWidth)
      .map((element) => `${element.tagName.toLowerCase()}#${element.id}.${element.className}`),
  );
  expect(overflowing).toEqual([]);
  // Text running out of a box that itself fits (a long address in a paragraph) widens the page too.
  const { pageWidth, windowWidth } = await page.evaluate(() => ({
    pageWidth: document.documentElement.scrollWidth,
    windowWidth: window.innerWidth,
  }));
  expect(pageWidth, 'the page is wider than the window').toBeLessThanOrEqual(windowWidth);
}

const isFocused = (locator: Locator) => locator.evaluate((element) => element === document.activeElement);

/** What a screen reader reads after a control's name: the text of what its aria-describedby names. */
const descriptionOf = (locator: Locator) =>
  locator.evaluate((element) =>
    (element.getAttribute('aria-describedby') ?? '')
      .split(' ')
      .filter(Boolean)
      .map((id) => document.getElementById(id)?.textContent?.trim())
      .join(' '),
  );

/**
 * From now on, what the page's live regions announce, as a screen reader is told: the text of every
 * element or text added to a status or an alert, of every alert added (a new view's too), and of
 * every text in a live region that changes. A text set again unchanged changes nothing in the page,
 * so it is not announced.
 */
async function listenToLiveRegions(page: Page): Promise<() => Promise<string[]>> {
  await page.evaluate(() => {
    const heard: string[] = [];
    (window as unknown as { heard: string[] }).heard = heard;
    const live = '[role="status"], [role="alert"], [aria-live]';
    const hear = (node: Node) => {
      const element = node instanceof Element ? node : node.parentElement;
      const text = node.textContent?.trim();
      if (text && element?.closest(live)) heard.push(text);
      else if (node instanceof Element)
        for (const alert of node.querySelectorAll('[role="alert"]'))
          if (alert.textContent?.trim()) heard.push(alert.textContent.trim());
    };
    new MutationObserver((records) => {
      for (const record of records)
        if (record.type === 'characterData') hear(record.target);
        else record.addedNodes.forEach(hear);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  return () => page.evaluate(() => (window as unknown as { heard: string[] }).heard);
}

/** The focused element shows a focus ring of at least 2 px. */
async function expectVisibleFocus(page: Page) {
  const outline = await page.evaluate(() => {
    const style = getComputedStyle(document.activeElement ?? document.body);
    return { style: style.outlineStyle, width: Number.parseFloat(style.outlineWidth) };
  });
  expect(outline.style).not.toBe('none');
  expect(outline.width).toBeGreaterThanOrEqual(2);
}

/**
 * The page's main column, down to `until` (the whole column without it), into docs/screenshots when
 * the file is missing or with UPDATE_SCREENSHOTS=1, so that an ordinary run leaves the tree as it was.
 */
async function screenshot(page: Page, name: string, until?: Locator) {
  await page.evaluate(() => window.scrollTo(0, 0));
  const main = await page.locator('main').boundingBox();
  const end = until ? await until.boundingBox() : main;
  if (!main || !end) throw new Error(`nothing to take a screenshot of for ${name}`);
  const bottom = end.y + end.height + (until ? 16 : 0);
  const clip = { x: main.x, y: 0, width: main.width, height: Math.ceil(bottom) };
  const image = await page.screenshot({ clip, fullPage: true, animations: 'disabled', caret: 'hide' });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  if (process.env.UPDATE_SCREENSHOTS === '1' || !existsSync(file)) {
    await mkdir(SCREENSHOTS, { recursive: true });
    await writeFile(file, image);
  }
}

const alertText = async (scope: Page | Locator) =>
  (await scope.getByRole('alert').first().innerText()).trim();

/** Answers a request as the gateway does while Postgres or Redis is away. */
const serviceUnavailable = (route: Route) =>
  route.fulfill({
    status: 503,
    contentType: 'application/json',
    body: JSON.stringify({
      isSuccess: false,
      statusCode: 503,
      data: null,
      errors: ['Service unavailable'],
      timestamp: new Date().toISOString(),
    }),
  });

// ---------------------------------------------------------------------------------------------

describe('sign-in', () => {
  it('works with the keyboard alone, and a wrong code can be retried', async () => {
    const page = await openConsole(await newContext());
    const email = newEmail('keys');
    const emailBox = page.getByRole('textbox', { name: 'Email' });
    await emailBox.waitFor();
    expect(await isFocused(emailBox)).toBe(true);
    await expectAccessible(page, 'sign-in');

    await page.keyboard.type(email);
    await screenshot(page, 'sign-in');
    await page.keyboard.press('Tab');
    expect(await isFocused(page.getByRole('button', { name: 'Send code' }))).toBe(true);
    await expectVisibleFocus(page);
    await page.keyboard.press('Enter');

    const codeBox = page.getByRole('textbox', { name: 'Code' });
    await codeBox.waitFor();
    expect(await isFocused(codeBox)).toBe(true);
    const code = await codeFromEmail(email, 0);
    await page.keyboard.type(wrong(code));
    await page.keyboard.press('Enter');
    expect(await alertText(page)).toBe(
      'That code is not right. Check the newest email, the only code that works, and try again (4 tries left).',
    );
    expect(await codeBox.getAttribute('aria-invalid')).toBe('true');
    await expectAccessible(page, 'sign-in, wrong code');

    // The wrong code is selected: typing the right one replaces it.
    expect(await isFocused(codeBox)).toBe(true);
    await page.keyboard.type(code);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Complete your registration' }).waitFor();
  });

  it('says on the Code field where the code went, its 4 digits, and until when it works', async () => {
    const context = await newContext();
    // The page's clock only (Playwright's): the time the code works until is the page's, as it was sent.
    await context.clock.install({ time: new Date('2026-11-22T16:37:00.000Z') });
    const page = await openConsole(context);
    const email = newEmail('told');
    await page.getByRole('textbox', { name: 'Email' }).fill(email);
    const answer = page.waitForResponse('**/api/v1/auth/send-otp-email');
    await page.keyboard.press('Enter');
    const { expiresIn } = (await (await answer).json()).data as { expiresIn: number };
    const until = new Intl.DateTimeFormat('en-US', { timeStyle: 'short', timeZone: 'UTC' }).format(
      new Date(Date.parse('2026-11-22T16:37:00.000Z') + expiresIn * 1000),
    );

    // Read out as the focus arrives in the field, and shown under its label.
    const codeBox = page.getByRole('textbox', { name: 'Code' });
    await codeBox.waitFor();
    expect(await isFocused(codeBox)).toBe(true);
    const told = `4 digits, sent to ${email}. It works until ${until}.`;
    expect(await descriptionOf(codeBox)).toBe(told);
    expect(await page.getByText(told).isVisible()).toBe(true);
    await expectAccessible(page, 'sign-in, code sent');

    // Once that time has come, the page says so, instead of "works until" a time gone by.
    await page.clock.fastForward(expiresIn * 1000);
    await page.getByRole('status').filter({ hasText: 'This code has expired. Send a new code.' }).waitFor();
    expect(await descriptionOf(codeBox)).toBe(`4 digits, sent to ${email}. It stopped working at ${until}.`);

    // Typed anyway (used meanwhile, as it happens): the field says why it is refused, and only the field.
    const code = await codeFromEmail(email, 0);
    await api('POST', '/api/v1/auth/verify-otp-email', { email, code });
    await codeBox.fill(code);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('This code has expired or was already used. Send a new code.').waitFor();
    expect(await page.getByText(/This code has expired\. Send a new code\./).count()).toBe(0);
  });

  it('shows an outage for the form, and does not mark a right email or code as wrong', async () => {
    const page = await openConsole(await newContext());
    const email = newEmail('outage');
    const emailBox = page.getByRole('textbox', { name: 'Email' });
    const sendRoute = '**/api/v1/auth/send-otp-email';
    await page.route(sendRoute, serviceUnavailable);
    await emailBox.fill(email);
    await page.keyboard.press('Enter');
    expect(await alertText(page)).toBe('The service is unavailable right now. Try again in a moment.');
    expect(await emailBox.getAttribute('aria-invalid')).toBeNull();
    expect(await descriptionOf(emailBox)).toBe('');
    expect(await isFocused(emailBox)).toBe(true);
    await expectAccessible(page, 'sign-in, service unavailable');
    await page.unroute(sendRoute);
    await page.keyboard.press('Enter');

    const codeBox = page.getByRole('textbox', { name: 'Code' });
    await codeBox.waitFor();
    expect(await page.getByRole('alert').count()).toBe(0);
    const verifyRoute = '**/api/v1/auth/verify-otp-email';
    await page.route(verifyRoute, (route) => route.abort('internetdisconnected'));
    await codeBox.fill(await codeFromEmail(email, 0));
    await page.keyboard.press('Enter');
    expect(await alertText(page)).toBe('Cannot reach the server. Check your connection and try again.');
    expect(await codeBox.getAttribute('aria-invalid')).toBeNull();
    expect(await descriptionOf(codeBox)).toMatch(/^4 digits, sent to /);
    // The code stays as typed: once the server answers again, Enter is all it takes.
    await page.unroute(verifyRoute);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Complete your registration' }).waitFor();
  });

  it("says when a new code may be sent once the hour's codes are used", async () => {
    const page = await openConsole(await newContext());
    const email = newEmail('thrifty');
    await page.getByRole('textbox', { name: 'Email' }).fill(email);
    await page.getByRole('button', { name: 'Send code' }).click();
    for (let sent = 1; sent < SENDS_PER_EMAIL; sent++) {
      await codeFromEmail(email, sent - 1);
      await page.getByRole('button', { name: 'Send a new code' }).click();
    }
    await codeFromEmail(email, SENDS_PER_EMAIL - 1);
    // The last send's answer said how long the hour's budget is full: no refusal to run into.
    const resend = page.getByRole('button', { name: 'Send a new code' });
    // Waited for by the wait it names: the button is also aria-disabled while the send is in flight.
    await expect.poll(() => resend.getAttribute('aria-describedby')).toBe('resend-wait');
    expect(await resend.getAttribute('aria-disabled')).toBe('true');
    const wait = page.locator(`#${await resend.getAttribute('aria-describedby')}`);
    expect(await wait.innerText()).toMatch(/^You can send a new code in (\d+ minutes|1 hour)\.$/);
    expect(await page.getByRole('alert').count()).toBe(0);
  });

  it('says when to try again once too many codes were asked for', async () => {
    const page = await openConsole(await newContext());
    const email = newEmail('eager');
    await page.getByRole('textbox', { name: 'Email' }).fill(email);
    await page.getByRole('button', { name: 'Send code' }).click();
    for (let sent = 1; sent < SENDS_PER_EMAIL - 1; sent++) {
      await codeFromEmail(email, sent - 1);
      await page.getByRole('button', { name: 'Send a new code' }).click();
    }
    await codeFromEmail(email, SENDS_PER_EMAIL - 2);
    // Another device asks for the hour's last code, which the page cannot know.
    const elsewhere = await gateway.app.inject({
      method: 'POST',
      url: '/api/v1/auth/send-otp-email',
      payload: { email },
    });
    expect(elsewhere.statusCode).toBe(200);
    await page.getByRole('button', { name: 'Send a new code' }).click();
    expect(await alertText(page)).toMatch(
      /^Too many codes were requested for this inbox \(an address and its \+tag spellings count together\)\. Try again in (\d+ minutes|1 hour)\.$/,
    );
    // The refusal replaces the last "on its way", and is about sending, not about the code typed.
    expect(await page.getByText(/A new code is on its way/).count()).toBe(0);
    const codeBox = page.getByRole('textbox', { name: 'Code' });
    expect(await codeBox.getAttribute('aria-invalid')).toBeNull();
    expect(await descriptionOf(codeBox)).toMatch(/^4 digits, sent to \S+\. It works until [^.]+\.$/);
    await expectAccessible(page, 'sign-in, new code refused');
  });

  it('counts down to when a new code may be sent, and sends none before', async () => {
    // The page's clock is Playwright's, so a 30-second cooldown takes no time to wait out.
    const context = await newContext();
    await context.clock.install();
    const page = await openConsole(context);
    let sends = 0;
    await page.route('**/api/v1/auth/send-otp-email', async (route) => {
      sends += 1;
      const response = await route.fetch();
      const answer = await response.json();
      answer.data.resendIn = 30;
      await route.fulfill({ response, json: answer });
    });
    const email = newEmail('patient');
    await page.getByRole('textbox', { name: 'Email' }).fill(email);
    await page.getByRole('button', { name: 'Send code' }).click();
    const resend = page.getByRole('button', { name: 'Send a new code' });
    await resend.waitFor();
    expect(await resend.getAttribute('aria-disabled')).toBe('true');
    const wait = page.locator(`#${await resend.getAttribute('aria-describedby')}`);
    expect(await wait.innerText()).toMatch(/^You can send a new code in (30|29) seconds\.$/);

    // Asked for too early, nothing is sent and nothing contradicts the countdown.
    await resend.focus();
    await page.keyboard.press('Enter');
    await page.clock.fastForward(10_000);
    await expect.poll(() => wait.innerText()).toMatch(/^You can send a new code in (20|19) seconds\.$/);
    expect(sends).toBe(1);
    expect(await page.getByRole('alert').count()).toBe(0);

    await page.clock.fastForward(20_000);
    await expect.poll(() => resend.getAttribute('aria-disabled')).toBeNull();
    await page.keyboard.press('Enter');
    await page
      .getByRole('status')
      .filter({ hasText: `A new code is on its way to ${email}.` })
      .waitFor();
    expect(sends).toBe(2);
    expect(await isFocused(resend)).toBe(true);
    expect(await resend.getAttribute('aria-disabled')).toBe('true');
    await page.getByRole('textbox', { name: 'Code' }).fill(await codeFromEmail(email, 1));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Complete your registration' }).waitFor();
  });

  it('takes a pasted code with spaces around it', async () => {
    const page = await openConsole(await newContext());
    const email = newEmail('paste');
    await page.getByRole('textbox', { name: 'Email' }).fill(email);
    await page.getByRole('button', { name: 'Send code' }).click();
    const codeBox = page.getByRole('textbox', { name: 'Code' });
    await codeBox.fill(` ${await codeFromEmail(email, 0)} `);
    expect(await codeBox.getAttribute('inputmode')).toBe('numeric');
    expect(await codeBox.getAttribute('autocomplete')).toBe('one-time-code');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Complete your registration' }).waitFor();
  });

  it('wraps a long address on a phone instead of scrolling sideways', async () => {
    const page = await openConsole(await newContext({ width: 375, height: 700 }));
    const email = 'a.very.long.email.address.for.testing@subdomain.example-company.com';
    await page.getByRole('textbox', { name: 'Email' }).fill(email);
    await page.getByRole('button', { name: 'Send code' }).click();
    const codeBox = page.getByRole('textbox', { name: 'Code' });
    await codeBox.waitFor();
    await expectNoSidewaysScroll(page);
    await codeBox.fill(await codeFromEmail(email, 0));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText(`Signed in as ${email}.`).waitFor();
    await expectNoSidewaysScroll(page);
  });

  it('signs in a person whose browser blocks all cookies and site data, until the page is closed', async () => {
    // A profile of its own whose setting blocks every cookie, and with them localStorage.
    const profile = await mkdtemp(path.join(tmpdir(), 'tessera-console-profile-'));
    await mkdir(path.join(profile, 'Default'));
    const blocked = { profile: { default_content_setting_values: { cookies: 2 } } };
    await writeFile(path.join(profile, 'Default', 'Preferences'), JSON.stringify(blocked));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      baseURL,
      viewport: { width: 900, height: 720 },
    });
    context.setDefaultTimeout(8_000);
    try {
      const page = await openConsole(context);
      expect(await page.evaluate(() => localStorage.length).catch((error: Error) => error.message)).toMatch(
        /Access is denied/,
      );
      const email = newEmail('nocookies');
      await signInThroughPage(page, email, 0);
      await page.getByRole('heading', { level: 1, name: 'Complete your registration' }).waitFor();
      // Nothing kept: a reload asks to sign in again.
      await page.reload();
      await page.getByRole('textbox', { name: 'Email' }).waitFor();
    } finally {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    }
  });

  it('shows an address at an internationalized domain as its owner writes it, not in its ASCII form', async () => {
    const page = await openConsole(await newContext());
    const local = `eve.${++people}.${Date.now()}`;
    await page.getByRole('textbox', { name: 'Email' }).fill(`${local}@Bücher.example`);
    await page.getByRole('button', { name: 'Send code' }).click();
    // The API answers the ASCII form (punycode), which the email is sent to; the SMTP server
    // (smtp-server) reports its recipient decoded.
    const code = await codeFromEmail(`${local}@bücher.example`, 0);
    const codeBox = page.getByRole('textbox', { name: 'Code' });
    expect(
      await codeBox.getAttribute('aria-describedby').then((id) => page.locator(`#${id}`).innerText()),
    ).toContain(`sent to ${local}@bücher.example.`);
    await codeBox.fill(code);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText(`Signed in as ${local}@bücher.example.`).waitFor();
  });

  it('asks for an email address before sending anything, again on every try', async () => {
    const page = await openConsole(await newContext());
    await page.getByRole('textbox', { name: 'Email' }).fill('not-an-address');
    const heard = await listenToLiveRegions(page);
    await page.keyboard.press('Enter');
    const problem = 'Enter your email address, such as name@example.com.';
    expect(await alertText(page)).toBe(problem);
    // Enter again, the address unchanged: the same words are read out again, not silence.
    await page.keyboard.press('Enter');
    await expect.poll(heard).toEqual([problem, problem]);
  });
});

describe('registration', () => {
  it('shows each problem next to its field, refuses a taken username, then shows the account', async () => {
    const taken = await registeredPerson('Taken', 'Already');
    const page = await openConsole(await newContext({ width: 900, height: 900 }));
    await signInThroughPage(page, newEmail('ada'));
    await page.getByRole('heading', { level: 1, name: 'Complete your registration' }).waitFor();
    const privacy = page.getByRole('checkbox', { name: /privacy policy \(version 1\.0\.0\)/ });
    const terms = page.getByRole('checkbox', { name: /terms of use \(version 1\.0\.0\)/ });
    const consent = page.getByRole('checkbox', { name: /consent/ });
    expect(await consent.isVisible()).toBe(true);
    // Which fields are required is said before any error: in words, and to screen readers.
    expect(await page.getByText('All fields are required unless marked optional.').isVisible()).toBe(true);
    for (const field of [
      page.getByRole('textbox', { name: 'Name', exact: true }),
      page.getByRole('textbox', { name: 'Surname' }),
      page.getByRole('textbox', { name: 'Username' }),
      privacy,
      terms,
    ])
      expect(await field.getAttribute('aria-required')).toBe('true');
    expect(await consent.getAttribute('aria-required')).toBeNull();
    await expectAccessible(page, 'registration');

    await page.getByRole('button', { name: 'Continue' }).click();
    const name = page.getByRole('textbox', { name: 'Name', exact: true });
    const username = page.getByRole('textbox', { name: 'Username' });
    await page.getByText('Enter your name.').waitFor();
    // Each problem sits with its field and is read with it: the first field's once it has the focus,
    // the others' as the person moves on. None is an alert, which would say all five at once, and the
    // first twice.
    expect(await name.getAttribute('aria-invalid')).toBe('true');
    expect(await name.getAttribute('aria-describedby')).toBe('name-error');
    expect(await isFocused(name)).toBe(true);
    expect(await descriptionOf(privacy)).toBe('Accept the privacy policy to continue.');
    expect(await page.getByRole('alert').count()).toBe(0);
    expect(await page.locator('#privacy-policy-error').innerText()).toBe(
      'Accept the privacy policy to continue.',
    );
    await expectAccessible(page, 'registration with problems');

    await name.fill('Ada');
    await page.getByRole('textbox', { name: 'Surname' }).fill('Lovelace');
    await username.fill('a');
    await privacy.check();
    await terms.check();
    await consent.check();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByText('Username must be 3–30 characters.').waitFor();
    expect(await isFocused(username)).toBe(true);

    // Enter in the field at fault: it keeps the focus, and is focused again, so its error is read.
    await username.fill(taken.username.toUpperCase());
    const focusEvents = await username.evaluateHandle((field) => {
      const seen = { count: 0 };
      field.addEventListener('focus', () => {
        seen.count += 1;
      });
      return seen;
    });
    await username.press('Enter');
    await page.getByText('Username is taken.').waitFor();
    await expect.poll(() => focusEvents.evaluate((seen) => seen.count)).toBe(1);
    expect(await isFocused(username)).toBe(true);
    expect(await username.getAttribute('aria-invalid')).toBe('true');
    expect(await descriptionOf(username)).toBe(
      '3 to 30 characters: letters, digits, dots and underscores. Username is taken.',
    );

    await username.fill(`ada_${people}`);
    await screenshot(page, 'registration');
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { level: 1, name: 'Ada Lovelace' }).waitFor();
  });
});

describe('a policy with a new version', () => {
  it('asks a returning user only to accept it, then shows the account', async () => {
    const evelyn = await registeredPerson('Evelyn', 'Boyd');
    // Accepted at an older version than the one in force.
    await gateway.app.db
      .updateTable('users')
      .set({ privacyPolicyVersion: '0.9.0' })
      .where('email', '=', evelyn.email)
      .execute();
    const page = await openConsole(await newContext());
    await signInThroughPage(page, evelyn.email);

    await page.getByRole('heading', { level: 1, name: 'Accept the updated policies' }).waitFor();
    expect(await page.getByRole('textbox').count()).toBe(0);
    const privacy = page.getByRole('checkbox', { name: /privacy policy \(version 1\.0\.0\)/ });
    expect(await privacy.isChecked()).toBe(false);
    // Only the policy with a new version: the terms and the optional consent were answered already.
    expect(await page.getByRole('checkbox').count()).toBe(1);
    await expectAccessible(page, 'policy update');
    await privacy.check();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { level: 1, name: 'Evelyn Boyd' }).waitFor();
    const stored = await api('GET', '/api/v1/users/me', undefined, evelyn.accessToken);
    expect(stored).toMatchObject({ privacyPolicyVersion: '1.0.0', username: evelyn.username });
  });
});

describe('account', () => {
  it('shows each part of a name as written, and takes a bio as long as the API does', async () => {
    const ayse = await registeredPerson('Ayse', 'nimdA');
    // A name stored before the gateway refused bidirectional controls: its override must not turn
    // the surname around (into "Admin").
    await gateway.app.db
      .updateTable('users')
      .set({ name: 'Ayşe\u202e' })
      .where('email', '=', ayse.email)
      .execute();
    const page = await openConsole(await newContext());
    await signInThroughPage(page, ayse.email);
    // Not any h1: the sign-in form's "Sign in" is one until the account is shown.
    const heading = page.getByRole('heading', { level: 1, name: /nimdA/ });
    await heading.waitFor();
    const drawn = await heading.evaluate((h1) => {
      const walker = document.createTreeWalker(h1, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const at = node.textContent?.indexOf('nimdA') ?? -1;
        if (at < 0) continue;
        const left = (offset: number) => {
          const range = document.createRange();
          range.setStart(node, offset);
          range.setEnd(node, offset + 1);
          return range.getBoundingClientRect().left;
        };
        return { n: left(at), A: left(at + 4) };
      }
      return undefined;
    });
    expect(drawn).toBeDefined();
    expect(drawn?.n, 'the surname reads left to right, as written').toBeLessThan(drawn?.A ?? 0);

    // 300 emoji are 300 characters to the API, and 600 UTF-16 units to a browser's maxlength.
    const profile = page.getByRole('region', { name: 'Profile' });
    await profile.getByRole('textbox', { name: 'Bio' }).fill('🙂'.repeat(300));
    const heard = await listenToLiveRegions(page);
    await profile.getByRole('button', { name: 'Save' }).click();
    await profile.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    const stored = await api('GET', '/api/v1/users/me', undefined, ayse.accessToken);
    expect([...stored.bio].length).toBe(300);
    // Saved again with no change: "Saved" is read out again, not silence.
    await profile.getByRole('button', { name: 'Save' }).click();
    await expect.poll(heard).toEqual(['Saved', 'Saved']);
  });

  it('edits the profile, lists and ends sessions, shows the activity, schedules and cancels deletion', async () => {
    // Grace signed in elsewhere first (an app, through the API): that is the other session.
    const grace = await registeredPerson('Grace', 'Hopper');
    const page = await openConsole(await newContext({ width: 900, height: 1000 }));
    await signInThroughPage(page, grace.email);
    await page.getByRole('heading', { level: 1, name: 'Grace Hopper' }).waitFor();

    // Profile
    const profile = page.getByRole('region', { name: 'Profile' });
    await profile.getByRole('textbox', { name: 'Bio' }).fill('Compilers, and a moth in the relay.');
    // UTC, which browsers do not list among their zones.
    await profile.getByRole('combobox', { name: 'Time zone' }).selectOption('UTC');
    await profile.getByRole('textbox', { name: 'Instagram' }).fill('@grace');
    await profile.getByRole('textbox', { name: 'X', exact: true }).fill('https://x.com/grace');
    await profile.getByRole('button', { name: 'Save' }).click();
    await profile.getByText('X must be a handle such as ayse.yilmaz, not a URL.').waitFor();
    expect(await profile.getByRole('textbox', { name: 'X', exact: true }).getAttribute('aria-invalid')).toBe(
      'true',
    );
    // The hint shown once for the handles is read with each of them.
    expect(await descriptionOf(profile.getByRole('textbox', { name: 'X', exact: true }))).toBe(
      'The handle alone, such as ada.lovelace, not a link. X must be a handle such as ayse.yilmaz, not a URL.',
    );
    await profile.getByRole('textbox', { name: 'X', exact: true }).fill('grace_h');
    await profile.getByRole('button', { name: 'Save' }).click();
    await profile.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    const stored = await api('GET', '/api/v1/users/me', undefined, grace.accessToken);
    expect(stored).toMatchObject({
      bio: 'Compilers, and a moth in the relay.',
      timezone: 'UTC',
      instagram: 'grace',
      x: 'grace_h',
    });

    // Sessions: this browser, and the API client's
    const sessions = page.getByRole('region', { name: 'Sessions' });
    const items = sessions.getByRole('listitem');
    await expect.poll(() => items.count()).toBe(2);
    const here = items.filter({ hasText: 'This device' });
    // When it was last used to the minute too, in the text rather than in a tooltip.
    expect(await here.innerText()).toMatch(
      /^Chrome on Linux\s*This device\s*IP 127\.0\.0\.1 · Last used just now \([A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2} [AP]M\) · Signed in /,
    );
    expect(await here.getByRole('button', { name: 'Sign out' }).count()).toBe(0);
    const other = items.filter({ hasNotText: 'This device' });
    expect(await other.innerText()).toMatch(/^node\s*IP 127\.0\.0\.1 · Last used/);
    // Its button says which session it signs out: the device, and when it signed in.
    const signedIn = /· Signed in ([^\n]+)/.exec(await other.innerText())?.[1];
    expect(
      await other.getByRole('button', { name: `Sign out node, signed in ${signedIn}`, exact: true }).count(),
    ).toBe(1);

    // Security activity
    const activity = page.getByRole('region', { name: 'Security activity' });
    await activity.getByText('Profile updated').first().waitFor();
    expect(await activity.getByText('Signed in').count()).toBe(2);

    await expectAccessible(page, 'account');
    await screenshot(page, 'account', sessions);

    // While the service is down, a sign-out fails: the device stays listed, and the page says why.
    const sessionRoutes = (url: URL) => url.pathname.startsWith('/api/v1/auth/sessions');
    await page.route(sessionRoutes, serviceUnavailable);
    await other.getByRole('button', { name: 'Sign out' }).click();
    await sessions.getByRole('alert').filter({ hasText: 'The service is unavailable right now.' }).waitFor();
    expect(await items.count()).toBe(2);
    await page.unroute(sessionRoutes);

    await other.getByRole('button', { name: 'Sign out' }).click();
    await sessions.getByRole('status').filter({ hasText: 'Signed out node.' }).waitFor();
    expect(await sessions.getByRole('alert').count()).toBe(0);
    await expect.poll(() => items.count()).toBe(1);
    await expect
      .poll(() =>
        api('GET', '/api/v1/users/me', undefined, grace.accessToken).catch((error: Error) => error.message),
      )
      .toMatch(/401/);
    await activity.getByText('A device was signed out').waitFor();

    // Deletion: a dialog to confirm, then the date and the way back
    await page.getByRole('button', { name: 'Delete account' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete your account?' });
    await dialog.waitFor();
    expect(await isFocused(dialog.getByRole('button', { name: 'Keep my account' }))).toBe(true);
    await expectAccessible(page, 'delete account dialog');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    await page.getByRole('button', { name: 'Delete account' }).click();
    await dialog.getByRole('button', { name: 'Delete my account' }).click();
    const scheduled = page.getByRole('region', { name: 'Deletion scheduled' });
    await scheduled.waitFor();
    const when = await api('GET', '/api/v1/users/me', undefined, await tokenOf(page));
    const due = new Date(when.accountDeletionScheduledFor);
    const date = new Intl.DateTimeFormat('en-US', { dateStyle: 'long', timeZone: 'UTC' }).format(due);
    const time = new Intl.DateTimeFormat('en-US', { timeStyle: 'short', timeZone: 'UTC' }).format(due);
    // The time of day too, in the text rather than in a tooltip.
    expect(await scheduled.innerText()).toContain(
      `Your account is scheduled for deletion on ${date} at ${time}.`,
    );
    await expectAccessible(page, 'deletion scheduled');
    await scheduled.getByRole('button', { name: 'Cancel deletion' }).click();
    await page.getByRole('status').filter({ hasText: 'Deletion cancelled: your account stays.' }).waitFor();
    expect(await page.getByRole('button', { name: 'Delete account' }).isVisible()).toBe(true);

    // Readable on a phone
    await page.setViewportSize({ width: 360, height: 740 });
    await expectNoSidewaysScroll(page);
    // And at 320 px with the browser's font set to "Very large" (24 px): the fields in pairs go one a row.
    await page.setViewportSize({ width: 320, height: 740 });
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Page.setFontSizes', { fontSizes: { standard: 24 } });
    await expectNoSidewaysScroll(page);
    await cdp.send('Page.setFontSizes', { fontSizes: { standard: 16 } });

    await sessions.getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.getByText('You signed out on every device.').waitFor();
    await page.getByRole('textbox', { name: 'Email' }).waitFor();
  });

  it('names each sign-out after its session, and says each session signed out, the same device twice too', async () => {
    const person = await registeredPerson('Barbara', 'Liskov');
    await signInThroughApi(person.email);
    const page = await openConsole(await newContext({ width: 900, height: 1000 }));
    await signInThroughPage(page, person.email);
    await page.getByRole('heading', { level: 1, name: 'Barbara Liskov' }).waitFor();
    const sessions = page.getByRole('region', { name: 'Sessions' });
    await expect.poll(() => sessions.getByRole('listitem').count()).toBe(3);

    // Not "Sign out", "Sign out" in a list of buttons: which device, and since when.
    const buttons = [...(await sessions.getByRole('list').ariaSnapshot()).matchAll(/button "([^"]*)"/g)];
    const names = buttons.map(([, name]) => name);
    expect(names).toEqual([
      expect.stringMatching(
        /^Sign out node, signed in [A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2} [AP]M(, 1 of 2)?$/,
      ),
      expect.stringMatching(
        /^Sign out node, signed in [A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2} [AP]M(, 2 of 2)?$/,
      ),
    ]);
    // Signed in within the same minute, they are told apart all the same.
    expect(new Set(names).size).toBe(2);

    // Two sessions of one device signed out in turn: the second "Signed out node." is read out too.
    const heard = await listenToLiveRegions(page);
    const signedOut = async () => (await heard()).filter((text) => text.startsWith('Signed out'));
    for (const left of [2, 1]) {
      await sessions
        .getByRole('button', { name: /^Sign out node/ })
        .first()
        .focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => sessions.getByRole('listitem').count()).toBe(left);
    }
    await expect.poll(signedOut).toEqual(['Signed out node.', 'Signed out node.']);
  });

  it('says how many events "Show more" shows, and keeps the focus once the last page takes it away', async () => {
    const person = await registeredPerson('Frances', 'Allen');
    for (let note = 1; note <= 12; note += 1)
      await api('PATCH', '/api/v1/users/me', { bio: `Note ${note}` }, person.accessToken);
    const page = await openConsole(await newContext({ width: 900, height: 1000 }));
    await signInThroughPage(page, person.email);
    await page.getByRole('heading', { level: 1, name: 'Frances Allen' }).waitFor();
    const activity = page.getByRole('region', { name: 'Security activity' });
    const items = activity.getByRole('listitem');
    await expect.poll(() => items.count()).toBe(10);

    const more = activity.getByRole('button', { name: 'Show more' });
    await more.focus();
    await page.keyboard.press('Enter');
    const status = activity.getByRole('status');
    await status.filter({ hasText: /^Showing \d+ of \d+ events\.$/ }).waitFor();
    const shown = await items.count();
    expect(shown).toBeGreaterThan(10);
    expect(await status.textContent()).toBe(`Showing ${shown} of ${shown} events.`);
    // The last page took the focused button away: the focus is on the section's heading, not lost.
    expect(await more.count()).toBe(0);
    expect(await isFocused(activity.getByRole('heading', { name: 'Security activity' }))).toBe(true);
    await expectAccessible(page, 'security activity, all shown');

    // The tab shown again reloads the list, and keeps in view what "Show more" brought.
    const reloaded = page.waitForResponse(
      (response) => new URL(response.url()).pathname === '/api/v1/users/me/security-events',
    );
    await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
    await reloaded;
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(resolve)));
    expect(await items.count()).toBe(shown);
  });

  it('writes dates in English, as the page is, in a browser that asks for German', async () => {
    const person = await registeredPerson('Lise', 'Meitner');
    await api('POST', '/api/v1/users/me/deletion', undefined, person.accessToken);
    const page = await openConsole(await newContext(undefined, 'de-DE'));
    await signInThroughPage(page, person.email);
    const scheduled = page.getByRole('region', { name: 'Deletion scheduled' });
    await scheduled.waitFor();
    expect(await scheduled.innerText()).toMatch(
      /scheduled for deletion on [A-Z][a-z]+ \d{1,2}, \d{4} at \d{1,2}:\d{2} [AP]M\./,
    );
    const here = page
      .getByRole('region', { name: 'Sessions' })
      .getByRole('listitem')
      .filter({ hasText: 'This device' });
    expect(await here.innerText()).toMatch(
      /Last used just now \([A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2} [AP]M\) · Signed in [A-Z][a-z]{2} \d{1,2}, \d{4}, /,
    );
  });

  it('keeps the focus on a button while its action runs, and runs it once', async () => {
    const mary = await registeredPerson('Mary', 'Jackson');
    const page = await openConsole(await newContext({ width: 900, height: 1000 }));
    await signInThroughPage(page, mary.email);
    await page.getByRole('heading', { level: 1, name: 'Mary Jackson' }).waitFor();
    const profile = page.getByRole('region', { name: 'Profile' });
    const save = profile.getByRole('button', { name: 'Save' });

    // The save is held until a second Enter has been pressed on the busy button.
    let patches = 0;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const me = (url: URL) => url.pathname === '/api/v1/users/me';
    await page.route(me, async (route) => {
      if (route.request().method() !== 'PATCH') return route.fallback();
      patches += 1;
      await held;
      await route.fallback();
    });
    await profile.getByRole('textbox', { name: 'Bio' }).fill('Wind tunnels.');
    await save.focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => patches).toBe(1);
    expect(await save.getAttribute('aria-disabled')).toBe('true');
    await page.keyboard.press('Enter');
    expect(await isFocused(save)).toBe(true);
    release();
    await profile.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    expect(await isFocused(save)).toBe(true);
    await expect.poll(() => save.getAttribute('aria-disabled')).toBeNull();
    expect(patches).toBe(1);
    await page.unroute(me);

    // A failure is read out from its alert; the focus stays where the person was.
    await page.route(me, (route) =>
      route.request().method() === 'PATCH' ? serviceUnavailable(route) : route.fallback(),
    );
    await profile.getByRole('textbox', { name: 'Bio' }).fill('Wind tunnels, and the law.');
    await save.focus();
    await page.keyboard.press('Enter');
    await profile.getByRole('alert').filter({ hasText: 'The service is unavailable right now.' }).waitFor();
    expect(await isFocused(save)).toBe(true);
    await page.unroute(me);

    const sessions = page.getByRole('region', { name: 'Sessions' });
    const everywhere = sessions.getByRole('button', { name: 'Sign out everywhere' });
    const logout = (url: URL) => url.pathname === '/api/v1/auth/logout';
    await page.route(logout, serviceUnavailable);
    await everywhere.focus();
    await page.keyboard.press('Enter');
    await sessions.getByRole('alert').filter({ hasText: 'The service is unavailable right now.' }).waitFor();
    expect(await isFocused(everywhere)).toBe(true);
    await expect.poll(() => everywhere.getAttribute('aria-disabled')).toBeNull();
    await page.unroute(logout);

    // Signing out another device takes its row away: the focus goes to the list's heading.
    const other = sessions.getByRole('listitem').filter({ hasNotText: 'This device' });
    await other.getByRole('button', { name: 'Sign out' }).focus();
    await page.keyboard.press('Enter');
    await sessions.getByRole('status').filter({ hasText: 'Signed out node.' }).waitFor();
    expect(await isFocused(sessions.getByRole('heading', { name: 'Sessions' }))).toBe(true);
  });

  it('says when this device could not be signed out, stays signed in, and signs out on a retry', async () => {
    const person = await registeredPerson('Evelyn', 'Boyd');
    const page = await openConsole(await newContext());
    await signInThroughPage(page, person.email);
    await page.getByRole('heading', { level: 1, name: 'Evelyn Boyd' }).waitFor();

    const sessionRoutes = (url: URL) => url.pathname.startsWith('/api/v1/auth/sessions');
    await page.route(sessionRoutes, (route) => route.abort('internetdisconnected'));
    const signOut = page.getByRole('button', { name: 'Sign out of this device' });
    await signOut.click();
    await page
      .getByRole('alert')
      .filter({
        hasText: /^This device could not be signed out, so it stays signed in\. Cannot reach the server\./,
      })
      .waitFor();
    expect(await page.getByText('You signed out of this device.').count()).toBe(0);
    expect(await page.getByRole('heading', { level: 1, name: 'Evelyn Boyd' }).isVisible()).toBe(true);
    // Still signed in on the server, and still able to try again.
    const token = await tokenOf(page);
    expect((await api('GET', '/api/v1/users/me', undefined, token)).email).toBe(person.email);
    expect(await isFocused(signOut)).toBe(true);

    // Once something else goes through, the alert no longer holds, and goes.
    await page.unroute(sessionRoutes);
    await page.getByRole('textbox', { name: 'Bio' }).fill('Still here.');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    expect(await page.getByRole('alert').count()).toBe(0);

    await signOut.click();
    await page.getByRole('status').filter({ hasText: 'You signed out of this device.' }).waitFor();
    await expect
      .poll(() => api('GET', '/api/v1/users/me', undefined, token).catch((error: Error) => error.message))
      .toMatch(/401/);
  });

  it('stays signed in when a proxy in the way, not the API, answers 401', async () => {
    const person = await registeredPerson('Mary', 'Jackson');
    const page = await openConsole(await newContext());
    await signInThroughPage(page, person.email);
    await page.getByRole('heading', { level: 1, name: 'Mary Jackson' }).waitFor();

    const profileRoute = (url: URL) => url.pathname === '/api/v1/users/me';
    await page.route(profileRoute, (route) =>
      route.request().method() === 'PATCH'
        ? route.fulfill({
            status: 401,
            contentType: 'text/html',
            body: '<h1>401 Authorization Required</h1>',
          })
        : route.fallback(),
    );
    const profile = page.getByRole('region', { name: 'Profile' });
    await profile.getByRole('textbox', { name: 'Bio' }).fill('Trajectories, by hand.');
    await profile.getByRole('button', { name: 'Save' }).click();
    await profile
      .getByRole('alert')
      .filter({ hasText: 'Cannot reach the server. Check your connection and try again.' })
      .waitFor();
    expect(await page.getByRole('heading', { level: 1, name: 'Mary Jackson' }).isVisible()).toBe(true);

    await page.unroute(profileRoute);
    await profile.getByRole('button', { name: 'Save' }).click();
    await profile.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
  });

  it('tells a person whose account was erased as scheduled that it was, not that a device signed them out', async () => {
    const ada = await registeredPerson('Ada', 'Yonath');
    const { _id: id } = await api('GET', '/api/v1/users/me', undefined, ada.accessToken);
    await api('POST', '/api/v1/users/me/deletion', undefined, ada.accessToken);
    // Due in seconds rather than after the grace period: late enough that the page has shown it before
    // the sweep (every second) erases the account, on a busy machine too (about 1.3 s on a quiet one).
    await gateway.app.db
      .updateTable('users')
      .set({ accountDeletionScheduledFor: new Date(Date.now() + 15_000) })
      .where('id', '=', id)
      .execute();
    const page = await openConsole(await newContext());
    await signInThroughPage(page, ada.email);
    const scheduled = page.getByRole('region', { name: 'Deletion scheduled' });
    await scheduled.waitFor();

    await expect
      .poll(
        async () =>
          (
            await gateway.app.db
              .selectFrom('users')
              .select('accountDeletionStatus')
              .where('id', '=', id)
              .executeTakeFirstOrThrow()
          ).accountDeletionStatus,
        { timeout: 30_000 },
      )
      .toBe('finalized');
    await scheduled.getByRole('button', { name: 'Cancel deletion' }).click();

    await page
      .getByRole('status')
      .filter({ hasText: 'Your account has been deleted, as scheduled.' })
      .waitFor();
    expect(await page.getByRole('textbox', { name: 'Email' }).isVisible()).toBe(true);
  }, 60_000);

  it('drops a page of activity that arrives after the list reloaded, instead of adding stale events', async () => {
    const linus = await registeredPerson('Linus', 'Pauling');
    for (let note = 1; note <= 10; note += 1)
      await api('PATCH', '/api/v1/users/me', { bio: `Note ${note}` }, linus.accessToken);
    const page = await openConsole(await newContext({ width: 900, height: 1000 }));
    await signInThroughPage(page, linus.email);
    await page.getByRole('heading', { level: 1, name: 'Linus Pauling' }).waitFor();
    const activity = page.getByRole('region', { name: 'Security activity' });
    const items = activity.getByRole('listitem');
    await expect.poll(() => items.count()).toBe(10);
    expect(await items.first().innerText()).toMatch(/^Signed in/);

    // "Show more" asks for page 2, whose answer is held until a save has reloaded the list.
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const secondPage = (url: URL) =>
      url.pathname === '/api/v1/users/me/security-events' && url.searchParams.get('page') === '2';
    await page.route(secondPage, async (route) => {
      const response = await route.fetch();
      await held;
      await route.fulfill({ response });
    });
    // Marks when the page itself has read page 2's answer: only then could it have added it.
    await page.evaluate(() => {
      const text = Response.prototype.text;
      Response.prototype.text = async function (this: Response) {
        const body = await text.call(this);
        const url = new URL(this.url);
        if (url.pathname === '/api/v1/users/me/security-events' && url.searchParams.get('page') === '2')
          document.body.dataset.secondPageRead = 'yes';
        return body;
      };
    });
    await activity.getByRole('button', { name: 'Show more' }).click();
    await page.getByRole('textbox', { name: 'Bio' }).fill('Two Nobel prizes.');
    await page.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => items.first().innerText()).toMatch(/^Profile updated/);

    release();
    await page.waitForFunction(() => document.body.dataset.secondPageRead === 'yes');
    // Let the page take the answer in and render.
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve))));
    expect(await items.count()).toBe(10);
    expect(await items.first().innerText()).toMatch(/^Profile updated/);
    expect(await activity.getByRole('button', { name: 'Show more' }).isEnabled()).toBe(true);
  });
});

/** The access token the page holds (in its localStorage), to look at the account as the page does. */
async function tokenOf(page: Page): Promise<string> {
  const stored = await page.evaluate(() => localStorage.getItem('tessera.console.tokens'));
  return (JSON.parse(stored ?? '{}') as { accessToken: string }).accessToken;
}

describe('the API away when the page loads', () => {
  it('says so, and "Try again" asks the API again without reloading the page', async () => {
    const hedy = await registeredPerson('Hedy', 'Lamarr');
    const page = await openConsole(await newContext());
    await signInThroughPage(page, hedy.email);
    await page.getByRole('heading', { level: 1, name: 'Hedy Lamarr' }).waitFor();

    const api = (url: URL) => url.pathname.startsWith('/api/v1/');
    await page.route(api, serviceUnavailable);
    await page.reload();
    const unavailable = 'The service is unavailable right now. Try again in a moment.';
    await page.getByRole('alert').filter({ hasText: unavailable }).waitFor();
    await expect.poll(() => page.title()).toBe('Error: Your account');

    // Still away on the first try: the focus stays on the button, and the failure is read out again.
    const tryAgain = page.getByRole('button', { name: 'Try again' });
    const heard = await listenToLiveRegions(page);
    await tryAgain.focus();
    await page.keyboard.press('Enter');
    await expect.poll(heard).toEqual([unavailable]);
    expect(await isFocused(tryAgain)).toBe(true);
    await expect.poll(() => tryAgain.getAttribute('aria-disabled')).toBeNull();

    await page.unroute(api);
    // A reload would ask for the page itself again, which a client over the rate limit is refused.
    let pageLoads = 0;
    page.on('request', (request) => {
      if (request.isNavigationRequest()) pageLoads += 1;
    });
    await page.keyboard.press('Enter');

    await page.getByRole('heading', { level: 1, name: 'Hedy Lamarr' }).waitFor();
    expect(pageLoads).toBe(0);
  });
});

describe('one person, several places', () => {
  it('returns a browser whose session was ended from another one to the sign-in form, with the reason', async () => {
    const person = await registeredPerson('Katherine', 'Johnson');
    const laptop = await openConsole(await newContext());
    await signInThroughPage(laptop, person.email);
    await laptop.getByRole('heading', { level: 1, name: 'Katherine Johnson' }).waitFor();
    const phone = await openConsole(await newContext({ width: 360, height: 740 }));
    await signInThroughPage(phone, person.email);
    await phone.getByRole('heading', { level: 1, name: 'Katherine Johnson' }).waitFor();
    await expectNoSidewaysScroll(phone);

    // The laptop sees the phone's session once it reloads the list, and ends it.
    await laptop.reload();
    const sessions = laptop.getByRole('region', { name: 'Sessions' });
    await expect.poll(() => sessions.getByRole('listitem').count()).toBe(3);
    const phoneSession = sessions
      .getByRole('listitem')
      .filter({ hasNotText: 'This device' })
      .filter({ hasText: 'Chrome on Linux' });
    await phoneSession.getByRole('button', { name: 'Sign out' }).click();
    await expect.poll(() => sessions.getByRole('listitem').count()).toBe(2);

    // The phone's next action brings it back to sign-in, saying why.
    await phone.getByRole('textbox', { name: 'Bio' }).fill('Written on the phone.');
    await phone.getByRole('button', { name: 'Save' }).click();
    await phone
      .getByText(
        'Your session has ended: it expired, or was signed out in another tab or from another device. Sign in again to continue.',
      )
      .waitFor();
    expect(await phone.getByRole('textbox', { name: 'Email' }).isVisible()).toBe(true);
    expect(await tokenOf(phone)).toBeUndefined();
  });

  it('shows a deletion scheduled, then cancelled, in another tab as it is, instead of a conflict', async () => {
    const person = await registeredPerson('Annie', 'Easley');
    const page = await openConsole(await newContext());
    await signInThroughPage(page, person.email);
    await page.getByRole('heading', { level: 1, name: 'Annie Easley' }).waitFor();

    await page.getByRole('button', { name: 'Delete account' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete your account?' });
    await dialog.waitFor();
    // Another tab schedules it first: this one's request is a 409.
    await api('POST', '/api/v1/users/me/deletion', undefined, person.accessToken);
    await dialog.getByRole('button', { name: 'Delete my account' }).click();
    await page.getByRole('region', { name: 'Deletion scheduled' }).waitFor();
    await dialog.waitFor({ state: 'hidden' });

    await api('DELETE', '/api/v1/users/me/deletion', undefined, person.accessToken);
    await page.getByRole('button', { name: 'Cancel deletion' }).click();
    await page.getByRole('status').filter({ hasText: 'Deletion cancelled: your account stays.' }).waitFor();
    expect(await page.getByRole('button', { name: 'Delete account' }).isVisible()).toBe(true);
    expect(await page.getByRole('alert').count()).toBe(0);
  });

  it('shows what another tab changed once this one is back in view, and a save here keeps it', async () => {
    const person = await registeredPerson('Mary', 'Jackson');
    const page = await openConsole(await newContext());
    await signInThroughPage(page, person.email);
    await page.getByRole('heading', { level: 1, name: 'Mary Jackson' }).waitFor();

    await api('PATCH', '/api/v1/users/me', { name: 'Marie' }, person.accessToken);
    await api('POST', '/api/v1/users/me/deletion', undefined, person.accessToken);
    await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
    await page.getByRole('region', { name: 'Deletion scheduled' }).waitFor();
    await page.getByRole('heading', { level: 1, name: 'Marie Jackson' }).waitFor();
    expect(await page.getByRole('button', { name: 'Delete account' }).count()).toBe(0);
    expect(await page.getByRole('textbox', { name: 'Name', exact: true }).inputValue()).toBe('Marie');

    // Only what was edited here is sent: the name changed elsewhere is not written back.
    await page.getByRole('textbox', { name: 'Bio' }).fill('Edited in this tab.');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    const saved = await api('GET', '/api/v1/users/me', undefined, person.accessToken);
    expect({ name: saved.name, bio: saved.bio }).toEqual({ name: 'Marie', bio: 'Edited in this tab.' });
  });

  it('keeps the focus, and what the page says, true to what another tab changed', async () => {
    const person = await registeredPerson('Katherine', 'Johnson');
    const page = await openConsole(await newContext({ width: 900, height: 1000 }));
    await signInThroughPage(page, person.email);
    const name = page.getByRole('heading', { level: 1, name: 'Katherine Johnson' });
    await name.waitFor();
    const token = await tokenOf(page);
    const shownAgain = () => page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
    // Scheduled in another tab, once ACCOUNT_DELETION_REQUEST_COOLDOWN has passed since the cancellation.
    const scheduledElsewhere = async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await api('POST', '/api/v1/users/me/deletion', undefined, token);
    };

    // The app's session ends elsewhere while its sign-out has the focus: the focus goes to the list's
    // heading, not to the start of the page.
    const sessions = page.getByRole('region', { name: 'Sessions' });
    await expect.poll(() => sessions.getByRole('listitem').count()).toBe(2);
    await sessions.getByRole('button', { name: /^Sign out node/ }).focus();
    const { list } = await api('GET', '/api/v1/auth/sessions', undefined, person.accessToken);
    const app = list.find((session: { current: boolean }) => session.current);
    await api('DELETE', `/api/v1/auth/sessions/${app._id}`, undefined, person.accessToken);
    await shownAgain();
    await expect.poll(() => sessions.getByRole('listitem').count()).toBe(1);
    expect(await isFocused(sessions.getByRole('heading', { name: 'Sessions' }))).toBe(true);

    // Scheduled here: the focus on the notice's heading, read with its date. Then cancelled here.
    await page.getByRole('button', { name: 'Delete account' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete my account' }).click();
    const notice = page.getByRole('heading', { name: 'Deletion scheduled' });
    await notice.waitFor();
    expect(await isFocused(notice)).toBe(true);
    expect(await descriptionOf(notice)).toMatch(
      /^Your account is scheduled for deletion on \w+ \d+, \d{4} at /,
    );
    await page.getByRole('button', { name: 'Cancel deletion' }).click();
    const cancelled = page.getByRole('status').filter({ hasText: 'Deletion cancelled: your account stays.' });
    await cancelled.waitFor();
    expect(await isFocused(name)).toBe(true);

    // Scheduled again elsewhere while the person types here: shown, the "cancelled" gone, and the
    // focus left where they type.
    const bio = page.getByRole('textbox', { name: 'Bio' });
    await bio.focus();
    await scheduledElsewhere();
    await shownAgain();
    await notice.waitFor();
    await expect.poll(() => cancelled.count()).toBe(0);
    expect(await isFocused(bio)).toBe(true);

    // A button taken away by a change elsewhere leaves the focus on the page's heading.
    await page.getByRole('button', { name: 'Cancel deletion' }).focus();
    await api('DELETE', '/api/v1/users/me/deletion', undefined, token);
    await shownAgain();
    await page.getByRole('button', { name: 'Delete account' }).waitFor();
    expect(await isFocused(name)).toBe(true);
    await page.getByRole('button', { name: 'Delete account' }).focus();
    await scheduledElsewhere();
    await shownAgain();
    await notice.waitFor();
    expect(await isFocused(name)).toBe(true);

    // Cancelled here once more: said again.
    const heard = await listenToLiveRegions(page);
    await page.getByRole('button', { name: 'Cancel deletion' }).click();
    await expect
      .poll(async () => (await heard()).filter((text) => text.startsWith('Deletion cancelled')))
      .toEqual(['Deletion cancelled: your account stays.']);

    // The dialog closed (Escape) before the answer came: its failure is said beside the button.
    await page.route('**/api/v1/users/me/deletion', async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 500));
      await serviceUnavailable(route);
    });
    await page.getByRole('button', { name: 'Delete account' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete my account' }).click();
    await page.keyboard.press('Escape');
    await page
      .getByRole('region', { name: 'Delete account' })
      .getByRole('alert')
      .filter({ hasText: 'The service is unavailable right now.' })
      .waitFor();
    await page.unroute('**/api/v1/users/me/deletion');
  });

  it('keeps two tabs in step: a sign-in and a sign-out in one show in the other', async () => {
    const person = await registeredPerson('Dorothy', 'Vaughan');
    const context = await newContext();
    const first = await openConsole(context);
    const second = await openConsole(context);
    await second.getByRole('textbox', { name: 'Email' }).waitFor();
    // Acted on, so in front: Chromium slows a background tab's timers (~2 s per action).
    await first.bringToFront();

    await signInThroughPage(first, person.email);
    await first.getByRole('heading', { level: 1, name: 'Dorothy Vaughan' }).waitFor();
    await second.getByRole('heading', { level: 1, name: 'Dorothy Vaughan' }).waitFor();

    await first.getByRole('button', { name: 'Sign out of this device' }).click();
    // Why the sign-in form is back is a status, read out on arrival.
    await first.getByRole('status').filter({ hasText: 'You signed out of this device.' }).waitFor();
    await second
      .getByRole('status')
      .filter({ hasText: /^Your session has ended/ })
      .waitFor();
    expect(await second.getByRole('textbox', { name: 'Email' }).isVisible()).toBe(true);
  });

  it('moves a tab left on the registration form to the account once another tab completed it', async () => {
    const context = await newContext();
    const first = await openConsole(context);
    const second = await openConsole(context);
    await first.bringToFront();
    await signInThroughPage(first, newEmail('mae'));
    const registering = { level: 1, name: 'Complete your registration' } as const;
    await first.getByRole('heading', registering).waitFor();
    await second.getByRole('heading', registering).waitFor();

    await first.getByRole('textbox', { name: 'Name', exact: true }).fill('Mae');
    await first.getByRole('textbox', { name: 'Surname' }).fill('Jemison');
    await first.getByRole('textbox', { name: 'Username' }).fill(`mae_${people}`);
    for (const policy of [/privacy policy/, /terms of use/, /consent/])
      await first.getByRole('checkbox', { name: policy }).check();
    await first.getByRole('button', { name: 'Continue' }).click();
    await first.getByRole('heading', { level: 1, name: 'Mae Jemison' }).waitFor();

    // The person comes back to the other tab.
    await second.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
    await second.getByRole('heading', { level: 1, name: 'Mae Jemison' }).waitFor();
  });
});
