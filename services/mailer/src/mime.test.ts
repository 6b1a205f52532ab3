import MailComposer from 'nodemailer/lib/mail-composer';
import { describe, expect, it } from 'vitest';
import { composeDeletionCancelledEmail, composeDeletionScheduledEmail } from './deletion-email.job.ts';
import { AUTOMATED, createMimeBuilder, type Email, type Fixed } from './mime.ts';
import { composeOtpEmail } from './send-otp.job.ts';

const FIXED: Fixed = {
  messageId: '<0123abcd-0000-1111-2222-333344445555@tessera.test>',
  date: new Date('2026-03-01T12:00:00.000Z'),
  baseBoundary: '65a4e4773b37f731',
};

/**
 * What nodemailer itself makes of an email, with the same Message-ID, Date and boundary, as it goes
 * over SMTP: its SMTP connection turns a bare LF into CRLF.
 */
async function nodemailerMessage(from: string, email: Email) {
  const node = new MailComposer({ from, ...email, headers: AUTOMATED, ...FIXED }).compile();
  const raw = (await node.build()).toString('latin1').replace(/\r?\n/g, '\r\n');
  return { envelope: node.getEnvelope(), raw };
}

const now = new Date('2026-03-01T12:00:00.000Z');
const inSeconds = (seconds: number) => new Date(now.getTime() + seconds * 1000).toISOString();

const EMAILS: Email[] = [
  ...['0000', '4826', '9999', '123456'].flatMap((code) =>
    [10, 60, 299, 300, 600, 3600].map((seconds) =>
      composeOtpEmail({ to: 'alice@example.com', code, expiresAt: inSeconds(seconds) }, now, 'Tessera'),
    ),
  ),
  composeOtpEmail(
    { to: 'first.last+tag@mail.example.co.uk', code: '4826', expiresAt: inSeconds(300) },
    now,
    'Tessera',
  ),
  composeOtpEmail(
    { to: `${'x'.repeat(60)}@example.com`, code: '4826', expiresAt: inSeconds(300) },
    now,
    'Tessera',
  ),
  // Addresses the job's schema lets through that nodemailer writes otherwise: quoted, lower-cased, an
  // IPv4 address.
  ...[
    '.a@example.com',
    'a.@example.com',
    'a..b@example.com',
    'A@EXAMPLE.COM',
    'Upper@Example.com',
    'a@1.2',
    'a@example.123',
  ].map((to) => composeOtpEmail({ to, code: '4826', expiresAt: inSeconds(300) }, now, 'Tessera')),
  composeOtpEmail({ to: 'zoë@example.com', code: '4826', expiresAt: inSeconds(300) }, now, 'Tessera'),
  composeOtpEmail({ to: 'bob@exämple.com', code: '4826', expiresAt: inSeconds(300) }, now, 'Tessera'),
  composeDeletionScheduledEmail(
    { to: 'carol@example.com', scheduledFor: '2026-12-22T10:00:00.000Z' },
    now,
    'Tessera',
  ),
  composeDeletionCancelledEmail({ to: 'dave@example.com', cancelledAt: '2026-12-01T08:05:00.000Z' }, 'Acme'),
  composeOtpEmail({ to: 'erin@example.com', code: '4826', expiresAt: inSeconds(300) }, now, 'Smith & Sons'),
  composeOtpEmail({ to: 'erin@example.com', code: '4826', expiresAt: inSeconds(300) }, now, 'Zoë'),
  { to: 'erin@example.com', subject: 'Say "hi" =?x?= ', text: 'trailing space \n', html: 'é' },
  { to: 'erin@example.com', subject: 'Tab\tand  two spaces', text: `${'a '.repeat(60)}end\n.dot`, html: '.' },
  {
    to: 'erin@example.com',
    subject: 'Long line',
    text: `${'word '.repeat(40)}end`,
    html: `<p>${'y'.repeat(200)}</p>`,
  },
];

describe('createMimeBuilder', () => {
  for (const from of [
    'Tessera <no-reply@tessera.test>',
    'Tessera bench <bench@tessera.test>',
    'no-reply@tessera.test',
    '"Tessera, Inc." <no-reply@tessera.test>',
    'Téssera <no-reply@tessera.test>',
  ]) {
    it(`writes every email byte for byte as nodemailer does, from ${from}`, async () => {
      const build = createMimeBuilder(from, () => FIXED);
      for (const email of EMAILS) {
        const expected = await nodemailerMessage(from, email);
        const message = await build(email);
        expect(message.raw.toString('latin1').replace(/\r?\n/g, '\r\n'), JSON.stringify(email)).toBe(
          expected.raw,
        );
        expect(message.envelope).toEqual(expected.envelope);
        expect(message.messageId).toBe(FIXED.messageId);
      }
    });
  }

  it('makes a new Message-ID, date and boundary for each message, in nodemailer’s forms', async () => {
    const build = createMimeBuilder('Tessera <no-reply@tessera.test>');
    const email = composeOtpEmail(
      { to: 'alice@example.com', code: '4826', expiresAt: inSeconds(300) },
      now,
      'Tessera',
    );
    const [a, b] = [await build(email), await build(email)];
    expect(a.messageId).toMatch(
      /^<[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}@tessera\.test>$/,
    );
    expect(a.messageId).not.toBe(b.messageId);
    const raw = a.raw.toString();
    expect(raw).toContain(`Message-ID: ${a.messageId}\r\n`);
    expect(raw).toMatch(/\r\nDate: \w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000\r\n/);
    expect(raw).toMatch(/boundary="--_NmP-[0-9a-f]{16}-Part_1"/);
  });

  it("gives every attempt of one job one Message-ID, not the job's id, and each job its own, as nodemailer would", async () => {
    const from = 'Tessera <no-reply@tessera.test>';
    const build = createMimeBuilder(from);
    const email = (id: string, to = 'alice@example.com') => ({
      ...composeOtpEmail({ to, code: '4826', expiresAt: inSeconds(300) }, now, 'Tessera'),
      id,
    });
    const [first, again, other] = await Promise.all([
      build(email('send-otp-1')),
      build(email('send-otp-1')),
      build(email('send-otp-2')),
    ]);
    expect(first.messageId).toMatch(
      /^<[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}@tessera\.test>$/,
    );
    expect(again.messageId).toBe(first.messageId);
    expect(other.messageId).not.toBe(first.messageId);
    expect(first.raw.toString()).not.toContain('send-otp-1');
    // An email nodemailer composes (an address to encode) takes the same.
    expect((await build(email('send-otp-1', 'zoë@example.com'))).messageId).toBe(first.messageId);
  });

  it('marks every message as automated, so that out-of-office replies leave it unanswered', async () => {
    for (const from of ['Tessera <no-reply@tessera.test>', 'Téssera <no-reply@tessera.test>']) {
      const raw = (await createMimeBuilder(from)(EMAILS[0] as Email)).raw.toString();
      expect(raw).toMatch(/^Auto-Submitted: auto-generated\r\nX-Auto-Response-Suppress: All\r\n/);
    }
  });
});
