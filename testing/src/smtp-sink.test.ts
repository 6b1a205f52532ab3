import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SmtpSink, startSmtpSink } from './smtp-sink.ts';

let sink: SmtpSink;
beforeAll(async () => {
  sink = await startSmtpSink();
});
afterAll(() => sink?.close());

/** A raw SMTP client: sends each line once the server has answered the one before. */
async function converse(lines: string[]): Promise<net.Socket> {
  const socket = net.connect(Number(new URL(sink.url).port), '127.0.0.1');
  const answer = () => new Promise((resolve) => socket.once('data', resolve));
  await answer();
  for (const line of lines) {
    socket.write(`${line}\r\n`);
    if (line !== 'Subject: partial') await answer();
  }
  return socket;
}

it('takes a client reset in the middle of a message as a message not received, not as an error', async () => {
  // Without the sink's error listener, smtp-server's report of this reset is an uncaught exception
  // that fails the whole run (a fault test killing a mailer mid-delivery).
  const dying = await converse([
    'EHLO dying',
    'MAIL FROM:<a@example.com>',
    'RCPT TO:<b@example.com>',
    'DATA',
  ]);
  dying.write('Subject: partial\r\n');
  const closed = new Promise((resolve) => dying.once('close', resolve));
  dying.resetAndDestroy();
  await closed;

  const whole = ['EHLO whole', 'MAIL FROM:<a@example.com>', 'RCPT TO:<c@example.com>', 'DATA'];
  const socket = await converse(whole);
  socket.write('Subject: whole\r\n\r\nbody\r\n.\r\n');
  const received = await sink.waitFor((mail) => mail.to.includes('c@example.com'));
  socket.end('QUIT\r\n');
  expect(received.subject).toBe('whole');
  expect(sink.messages.map((mail) => mail.to)).toEqual([['c@example.com']]);
});
