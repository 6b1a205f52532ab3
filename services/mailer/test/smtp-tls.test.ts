import { randomBytes } from 'node:crypto';
import { type SmtpSink, startSmtpSink } from '@tessera/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createTransport, type MailTransport } from '../src/transport.ts';

const email = {
  to: 'ada@example.com',
  subject: '7531 is your Tessera sign-in code',
  text: '7531',
  html: '7531',
};

let withTls: SmtpSink;
let withoutTls: SmtpSink;
beforeAll(async () => {
  [withTls, withoutTls] = await Promise.all([startSmtpSink(), startSmtpSink({ starttls: false })]);
});
afterAll(async () => {
  await Promise.all([withTls?.close(), withoutTls?.close()]);
});

function transportTo(smtpUrl: string, env: 'production' | 'development'): MailTransport {
  return createTransport(
    loadConfig({
      APP_ENV: env,
      SMTP_URL: smtpUrl,
      MAIL_FROM: 'Tessera <no-reply@tessera.test>',
      MAIL_JOB_KEY: `k1:${randomBytes(32).toString('base64')}`,
    }),
  );
}

async function sendThrough(transport: MailTransport, to: string) {
  try {
    await transport.send({ ...email, to });
  } finally {
    transport.close();
  }
}

describe('in production', () => {
  it('sends over a connection upgraded with STARTTLS', async () => {
    await sendThrough(transportTo(withTls.url, 'production'), 'tls@example.com');
    const received = await withTls.waitFor((mail) => mail.to.includes('tls@example.com'));
    expect(received.tls).toBe(true);
  });

  it('refuses to send the code in clear text to a server that offers no STARTTLS, and says so when probed', async () => {
    const transport = transportTo(withoutTls.url, 'production');
    try {
      // The reason the readiness probe gives.
      await expect(transport.verify()).rejects.toThrow(
        'smtp offers no STARTTLS, and production sends no mail in clear text (unless SMTP_URL says ?requireTLS=false)',
      );
      await expect(transport.send({ ...email, to: 'clear@example.com' })).rejects.toThrow(/STARTTLS/);
    } finally {
      transport.close();
    }
    expect(withoutTls.messages.filter((mail) => mail.to.includes('clear@example.com'))).toEqual([]);
  });

  it('sends in clear text when the URL says requireTLS=false (a relay on the same host)', async () => {
    await sendThrough(transportTo(`${withoutTls.url}/?requireTLS=false`, 'production'), 'relay@example.com');
    const received = await withoutTls.waitFor((mail) => mail.to.includes('relay@example.com'));
    expect(received.tls).toBe(false);
  });

  it('introduces itself by the name the URL gives (`?name=`)', async () => {
    await sendThrough(transportTo(`${withTls.url}&name=mail.acme.test`, 'production'), 'ehlo@example.com');
    const received = await withTls.waitFor((mail) => mail.to.includes('ehlo@example.com'));
    expect(received.ehlo).toBe('mail.acme.test');
  });
});

it('in development, still sends to a server without STARTTLS (a local mail catcher)', async () => {
  await sendThrough(transportTo(withoutTls.url, 'development'), 'dev@example.com');
  const received = await withoutTls.waitFor((mail) => mail.to.includes('dev@example.com'));
  expect(received.tls).toBe(false);
});
