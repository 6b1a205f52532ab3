import { promises as fs } from 'node:fs';
import path from 'node:path';
import nodemailer from 'nodemailer';
import type { MailerConfig } from './config.ts';

export interface Email {
  to: string;
  subject: string;
  text: string;
  html: string;
}

export interface MailTransport {
  send(email: Email): Promise<void>;
  close(): void;
}

/**
 * SMTP through nodemailer. Without SMTP_URL (development only) each message is written as an
 * `.eml` file to MAIL_OUTBOX_DIR instead, so a code can be read without a mail server.
 */
export function createTransport(config: MailerConfig): MailTransport {
  if (config.SMTP_URL) {
    const smtp = nodemailer.createTransport(config.SMTP_URL);
    return {
      async send(email) {
        await smtp.sendMail({ from: config.MAIL_FROM, ...email });
      },
      close: () => smtp.close(),
    };
  }
  const outbox = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  return {
    async send(email) {
      const info = await outbox.sendMail({ from: config.MAIL_FROM, ...email });
      await fs.mkdir(config.MAIL_OUTBOX_DIR, { recursive: true, mode: 0o700 });
      const file = path.join(
        config.MAIL_OUTBOX_DIR,
        `${new Date().toISOString().replaceAll(':', '-')}-${email.to}.eml`,
      );
      await fs.writeFile(file, info.message as Buffer, { mode: 0o600 });
    },
    close: () => outbox.close(),
  };
}
