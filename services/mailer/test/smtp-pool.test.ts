import { type SmtpSink, type SmtpSinkOptions, startSmtpSink } from '@tessera/testing';
import { UnrecoverableError } from 'bullmq';
import { afterEach, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { deliver } from '../src/deliver.ts';
import { createTransport, type MailTransport } from '../src/transport.ts';

// The mailer's pool of SMTP connections against a real server that closes or stalls them.

const opened: { sink: SmtpSink; transport: MailTransport }[] = [];
afterEach(async () => {
  for (const { sink, transport } of opened.splice(0)) {
    transport.close();
    await sink.close();
  }
});

/** A transport of one pooled connection to a sink of its own, `query` added to its SMTP_URL. */
async function pooled(options: SmtpSinkOptions = {}, query = '') {
  const sink = await startSmtpSink(options);
  const transport = createTransport(
    loadConfig({
      APP_ENV: 'test',
      SMTP_URL: `${sink.url}${query}`,
      MAIL_FROM: 'Tessera <no-reply@tessera.test>',
      SMTP_MAX_CONNECTIONS: '1',
    }),
  );
  opened.push({ sink, transport });
  return { sink, transport };
}

const email = (to: string) => ({ to, subject: '7531 is your sign-in code', text: '7531', html: '7531' });

it('sends the email over a new connection when the server closes the open one at its MAIL FROM (421)', async () => {
  const { sink, transport } = await pooled();
  await deliver(transport, email('first@example.com'));
  // The server's idle timeout racing the next message: it answers MAIL FROM with 421 and hangs up.
  sink.failNext(1, 421, 'MAIL FROM', '4.4.2 timeout, closing');
  await deliver(transport, email('second@example.com'));
  expect(sink.messages.map((mail) => mail.to)).toEqual([['first@example.com'], ['second@example.com']]);
});

it('leaves a server that stays silent after the message, and the job is retried', async () => {
  // SMTP_URL's query sets nodemailer's timeouts, here shorter than Tessera's 2 minutes of silence.
  const { sink, transport } = await pooled({ delayMs: 5_000 }, '&socketTimeout=300');
  const sending = deliver(transport, email('stalled@example.com'));
  await expect(sending).rejects.toMatchObject({ code: 'ETIMEDOUT' });
  await expect(sending).rejects.not.toBeInstanceOf(UnrecoverableError);
  expect(sink.inFlight()).toBe(1);
});

it('sends the next email after its idle connection was closed', async () => {
  const { sink, transport } = await pooled({}, '&idleTimeout=300');
  await deliver(transport, email('before@example.com'));
  // Unused for longer than the idle timeout: the pool closes that connection (QUIT) and opens another.
  await new Promise((resolve) => setTimeout(resolve, 800));
  await deliver(transport, email('after@example.com'));
  expect(sink.messages.map((mail) => mail.to)).toEqual([['before@example.com'], ['after@example.com']]);
});
