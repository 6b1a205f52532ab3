import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { NotReadyError } from '@tessera/telemetry';
import nodemailer from 'nodemailer';
import type { MailerConfig } from './config.ts';
import { maskAddresses } from './mask.ts';
import { AUTOMATED, createMimeBuilder, type Email, type RawMessage } from './mime.ts';
import { type Delivery, inSmtpSpan } from './smtp-span.ts';

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
    // Without it nodemailer sends the login and the codes in clear text whenever a `smtp://` server offers
    // no STARTTLS, or someone on the way strips the offer. The URL may still say `?requireTLS=false`.
    requireTLS: config.env === 'production',
    pool: true,
    maxConnections: config.smtp.maxConnections,
    maxMessages: config.smtp.maxMessages,
    // A code is worth minutes: a server that hangs is left sooner than nodemailer's defaults (up to 10
    // minutes), and the job retried over another connection. Not too soon: silence after the message's
    // end may be a relay checking it, and leaving then sends it again at the retry. An idle connection
    // is closed (QUIT) before that timeout would drop it. SMTP_URL's query may say otherwise.
    ...SMTP_TIMEOUTS,
  });
  const pool = smtp.transporter as unknown as PoolTransport;
  const build = createMimeBuilder(config.smtp.from);
  /** When the server accepted the last message sent (ms); never when the last send failed. */
  let lastAccepted = Number.NEGATIVE_INFINITY;
  return {
    delivery: 'smtp',
    async send(email) {
      // Handed to the pool as a message already built (mime.ts): sendMail would compose it again with
      // nodemailer's MailComposer and plugins, most of the CPU a send costs.
      const message = prebuilt(await build(email));
      await new Promise<void>((resolve, reject) => {
        pool.send(message, (error) => {
          lastAccepted = error ? Number.NEGATIVE_INFINITY : performance.now();
          if (error) reject(error);
          else resolve();
        });
      });
    },
    async verify() {
      // The last send accepted, within the time a pooled connection stays open, says more than a new
      // connection would: a server that limits connections per client refuses one more while the pool
      // holds its share, and a slow greeting outlasts the probe's time, though mail flows.
      if (performance.now() - lastAccepted < SMTP_TIMEOUTS.idleTimeout) return;
      await smtp.verify().catch((error: SmtpError) => {
        throw new NotReadyError(notReady(error));
      });
    },
    // Connections still carrying a message finish it first (the worker has finished its jobs by then anyway).
    close: () => smtp.close(),
  };
}

/** Milliseconds to connect, to be greeted, to stay silent mid-conversation, and to stay idle in the pool. */
const SMTP_TIMEOUTS = {
  connectionTimeout: 10_000,
  greetingTimeout: 10_000,
  socketTimeout: 120_000,
  idleTimeout: 60_000,
};

const NO_STARTTLS =
  'smtp offers no STARTTLS, and production sends no mail in clear text (unless SMTP_URL says ?requireTLS=false)';

/** What nodemailer's failures carry: the command that failed, the server's reply, or the socket's error. */
interface SmtpError {
  message?: string;
  code?: string;
  command?: string;
  responseCode?: number;
  response?: unknown;
}

/**
 * Why the server is not ready, for the probe's answer: the server's reply (`421 Too many connections`,
 * a refused login), or what failed before one (`certificate has expired`, `connect ECONNREFUSED …`).
 * Neither holds the URL's password; addresses in a reply are masked.
 */
function notReady({ message, code, command, responseCode, response }: SmtpError): string {
  if (command === 'STARTTLS' && responseCode !== undefined) return NO_STARTTLS;
  const said = typeof response === 'string' ? response : (message ?? 'no answer');
  const line = maskAddresses(said.split(/\r?\n/)[0] ?? '').slice(0, 200);
  return code === 'EAUTH' ? `smtp refused the login: ${line}` : `smtp is down: ${line}`;
}

/** nodemailer's transport interface, as its SMTP pool implements it. */
interface PoolTransport {
  send(mail: PrebuiltMail, callback: (error: Error | null) => void): void;
}

/**
 * A message as nodemailer's transports take it (`mail.message`, `mail.data`), built already: the pool
 * reads its envelope and Message-ID, and streams it (again, should a closed connection make the pool
 * send it over another) as one chunk, so it reaches the socket in one write.
 */
interface PrebuiltMail {
  data: Record<string, never>;
  message: {
    getEnvelope(): RawMessage['envelope'];
    messageId(): string;
    getHeader(key: string): string | undefined;
    createReadStream(): Readable;
  };
}

function prebuilt({ envelope, messageId, raw }: RawMessage): PrebuiltMail {
  return {
    data: {},
    message: {
      // A copy each time: nodemailer keeps a refused MAIL FROM's error on the envelope it is given, and
      // the same object would fail the message again when the pool retries it over a new connection.
      getEnvelope: () => ({ from: envelope.from, to: [...envelope.to] }),
      messageId: () => messageId,
      getHeader: (key) => (key.toLowerCase() === 'message-id' ? messageId : undefined),
      createReadStream: () => Readable.from([raw], { objectMode: false }),
    },
  };
}

function outboxTransport(config: MailerConfig): MailTransport {
  const outbox = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  return {
    delivery: 'outbox',
    async send({ id: _, ...email }) {
      const info = await outbox.sendMail({ from: config.smtp.from, ...email, headers: AUTOMATED });
      await fs.mkdir(config.smtp.outboxDir, { recursive: true, mode: 0o700 });
      // An address may hold characters a file name cannot (a/b@example.com is valid): they become _.
      // Its last 100 characters at most: a name has 255 bytes, an address up to 254 characters. A
      // random part keeps emails to one address in the same millisecond apart, and `wx` makes sure
      // no file is ever replaced.
      const name = email.to.replaceAll(/[^\w@.+-]/g, '_').slice(-100);
      const file = path.join(
        config.smtp.outboxDir,
        `${new Date().toISOString().replaceAll(':', '-')}-${randomUUID().slice(0, 8)}-${name}.eml`,
      );
      await fs.writeFile(file, info.message as Buffer, { mode: 0o600, flag: 'wx' }).catch(async (error) => {
        // No part of an email left behind for each attempt on a full disk (the job is retried); a
        // file that was there already (EEXIST) is another's.
        if (error.code !== 'EEXIST') await fs.rm(file, { force: true }).catch(() => {});
        throw error;
      });
    },
    verify: async () => {},
    close: () => outbox.close(),
  };
}
