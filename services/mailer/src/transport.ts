import { promises as fs } from 'node:fs';
import path from 'node:path';
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
 * SMTP through nodemailer. Without SMTP_URL (development only) each message is written as an
 * `.eml` file to MAIL_OUTBOX_DIR instead, so a code can be read without a mail server.
 * Every send is traced (smtp-span.ts).
 */
export function createTransport(config: MailerConfig): MailTransport {
  const transport = config.smtp.url ? smtpTransport(config.smtp.url, config) : outboxTransport(config);
  return {
    ...transport,
    send: (email) => inSmtpSpan(email.to, transport.delivery, () => transport.send(email)),
  };
}

function smtpTransport(url: string, config: MailerConfig): MailTransport {
  const smtp = nodemailer.createTransport(url);
  return {
    delivery: 'smtp',
    async send(email) {
      await smtp.sendMail({ from: config.smtp.from, ...email });
    },
    async verify() {
      await smtp.verify();
    },
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
