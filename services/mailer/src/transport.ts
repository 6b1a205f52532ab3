import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import nodemailer from 'nodemailer';
import type { MailerConfig } from './config.ts';
import { type Delivery, inSmtpSpan } from './smtp-span.ts';

export interface Email {
  to: string;
  subject: string;
  text: string;
  html: string;
}

export interface MailTransport {
  readonly delivery: Delivery;
  send(email: Email): Promise<void>;
  /** Resolves when the mail server accepts a connection (and the login); the outbox always does. */
  verify(): Promise<void>;
  close(): void;
}

/**
 * SMTP through nodemailer, over a pool of open connections. Without SMTP_URL (development only) each
 * message is written as an `.eml` file to MAIL_OUTBOX_DIR instead, so a code can be read without a
 * mail server. Every send is traced (smtp-span.ts).
 */
export function createTransport(config: MailerConfig): MailTransport {
  const transport = config.smtp.url ? smtpTransport(config.smtp.url, config) : outboxTransport(config);
  return {
    ...transport,
    send: (email) => inSmtpSpan(email.to, transport.delivery, () => transport.send(email)),
  };
}

function smtpTransport(url: string, config: MailerConfig): MailTransport {
  // A new connection costs the server's greeting (smtp-server and many MTAs hold it back 100 ms or more
  // to catch clients that talk too soon) and the TLS handshake: kept open, it is paid once per maxMessages.
  const smtp = nodemailer.createTransport({
    url,
    pool: true,
    maxConnections: config.smtp.maxConnections,
    maxMessages: config.smtp.maxMessages,
  });
  // The message reaches the socket in one write (WholeMessage below).
  smtp.use('stream', (mail, done) => {
    mail.message.transform(() => new WholeMessage());
    done();
  });
  return {
    delivery: 'smtp',
    async send(email) {
      await smtp.sendMail({ from: config.smtp.from, ...email });
    },
    async verify() {
      await smtp.verify();
    },
    // Connections still carrying a message finish it first (the worker has finished its jobs by then anyway).
    close: () => smtp.close(),
  };
}

function outboxTransport(config: MailerConfig): MailTransport {
  const outbox = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  return {
    delivery: 'outbox',
    async send(email) {
      const info = await outbox.sendMail({ from: config.smtp.from, ...email });
      await fs.mkdir(config.smtp.outboxDir, { recursive: true, mode: 0o700 });
      const file = path.join(
        config.smtp.outboxDir,
        `${new Date().toISOString().replaceAll(':', '-')}-${email.to}.eml`,
      );
      await fs.writeFile(file, info.message as Buffer, { mode: 0o600 });
    },
    verify: async () => {},
    close: () => outbox.close(),
  };
}

/**
 * Holds a message's pieces (headers, boundaries, each part) and passes them on as one: streamed as
 * they are made, each would be a write to the SMTP socket of its own (about 15 % of a send's CPU).
 * A code email is a few kilobytes.
 */
class WholeMessage extends Transform {
  private readonly pieces: Buffer[] = [];

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.pieces.push(chunk);
    callback();
  }

  override _flush(callback: TransformCallback): void {
    callback(null, Buffer.concat(this.pieces));
  }
}
