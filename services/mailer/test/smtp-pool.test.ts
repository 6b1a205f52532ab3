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

it('is ready while its pool holds every connection the server allows it, which a new one would be refused', async () => {
  const { sink, transport } = await pooled({ maxClients: 1 });
  // Never sent anything: the probe opens a connection, which the server takes.
  await expect(transport.verify()).resolves.toBeUndefined();
  await deliver(transport, email('first@example.com'));
  // The pool's connection stays open: a connection more is refused, as the probe's would be...
  const another = await pooledTo(sink);
  await expect(another.verify()).rejects.toThrow(/^smtp is down: 421 .*Too many connected clients/);
  // ...while the message the server just accepted vouches for it.
  await expect(transport.verify()).resolves.toBeUndefined();
  // Once a send fails (its connection kept), only a connection of its own tells.
  sink.failNext(1, 550, 'RCPT TO', '5.1.1 User unknown');
  await expect(deliver(transport, email('nobody@example.com'))).rejects.toBeInstanceOf(UnrecoverableError);
  await expect(transport.verify()).rejects.toThrow(/^smtp is down: 421 .*Too many connected clients/);
});

it('says why the server is not ready: the reply it gave, or what failed before one', async () => {
  const sink = await startSmtpSink();
  // Its certificate is smtp-server's own, which nothing trusts (SMTP_URL without tls.rejectUnauthorized).
  const untrusted = createTransport(
    loadConfig({
      APP_ENV: 'test',
      SMTP_URL: sink.url.replace(/\/?\?.*$/, ''),
      MAIL_FROM: 'no-reply@tessera.test',
    }),
  );
  opened.push({ sink, transport: untrusted });
  await expect(untrusted.verify()).rejects.toThrow(/^smtp is down: .*certificate/);
  const nobody = createTransport(
    loadConfig({ APP_ENV: 'test', SMTP_URL: 'smtp://127.0.0.1:1', MAIL_FROM: 'no-reply@tessera.test' }),
  );
  opened.push({ sink: await startSmtpSink(), transport: nobody });
  await expect(nobody.verify()).rejects.toThrow('smtp is down: connect ECONNREFUSED 127.0.0.1:1');
});

/** Another transport to `sink`, as a second mailer would be. */
async function pooledTo(sink: SmtpSink) {
  const transport = createTransport(
    loadConfig({ APP_ENV: 'test', SMTP_URL: sink.url, MAIL_FROM: 'Tessera <no-reply@tessera.test>' }),
  );
  opened.push({ sink: await startSmtpSink(), transport });
  return transport;
}
