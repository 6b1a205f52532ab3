import type { AddressInfo } from 'node:net';
import PostalMime from 'postal-mime';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  from: string;
  to: string[];
  subject: string;
  text: string;
  html: string;
  /** Each header's last value, by its name in lower case. */
  headers: Record<string, string>;
  /** Whether the message came over a connection upgraded with STARTTLS. */
  tls: boolean;
  /** The name the client gave in its EHLO. */
  ehlo: string;
}

export interface SmtpSink {
  url: string;
  /** The messages accepted: received, and answered 250 to a client still connected. */
  messages: ReceivedMail[];
  /** Messages received whose answer is still to come (see `delayMs`). */
  inFlight(): number;
  /**
   * Answers the next `count` messages with a failure: temporary (451) by default, as a flaky server
   * would; refusing their content (`DATA`, the default), their sender (`MAIL FROM`) or their
   * recipient (`RCPT TO`), with `text` after the code (`Refused`).
   */
  failNext(count: number, code?: number, command?: 'DATA' | 'MAIL FROM' | 'RCPT TO', text?: string): void;
  waitFor(predicate: (mail: ReceivedMail) => boolean, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

export interface SmtpSinkOptions {
  /** Answers each message only after this long, so that deliveries stay in flight for a while. */
  delayMs?: number;
  /**
   * Offers STARTTLS, with smtp-server's own self-signed certificate (the default; `url` then tells the
   * client to accept it), as most mail servers do. `false`: a server that offers none.
   */
  starttls?: boolean;
  /** Connections it takes at once; one more is answered `421 Too many connected clients`. */
  maxClients?: number;
}

/** A real SMTP server on a free loopback port that keeps what it receives, parsed. */
export async function startSmtpSink({
  delayMs = 0,
  starttls = true,
  maxClients = Number.POSITIVE_INFINITY,
}: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const messages: ReceivedMail[] = [];
  const waiters = new Set<() => void>();
  let failures = { count: 0, code: 451, command: 'DATA', text: 'Refused' };
  /** The failure to answer `command` with, if one is due (then counted). */
  const failure = (command: string) => {
    if (failures.count === 0 || failures.command !== command) return null;
    failures = { ...failures, count: failures.count - 1 };
    return Object.assign(new Error(failures.text), { responseCode: failures.code });
  };
  let inFlight = 0;

  const server = new SMTPServer({
    authOptional: true,
    maxClients,
    disabledCommands: starttls ? [] : ['STARTTLS'],
    logger: false,
    // Closing hangs up on connections a client keeps open (a mailer's pool), like a server going away.
    closeTimeout: 200,
    onMailFrom(_address, _session, callback) {
      callback(failure('MAIL FROM'));
    },
    onRcptTo(_address, _session, callback) {
      callback(failure('RCPT TO'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        inFlight += 1;
        setTimeout(answer, delayMs);
      });
      const answer = () => {
        inFlight -= 1;
        // Once its data has ended, a message is the server's, as with a real one (RFC 5321 §6.1):
        // a client killed while it waited for the answer never learns that, and may send it again.
        const refused = failure('DATA');
        if (refused) return callback(refused);
        PostalMime.parse(Buffer.concat(chunks)).then(
          (mail) => {
            messages.push({
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              to: session.envelope.rcptTo.map((r) => r.address),
              subject: mail.subject ?? '',
              text: mail.text ?? '',
              html: mail.html ?? '',
              headers: Object.fromEntries(mail.headers.map(({ key, value }) => [key, value])),
              tls: session.secure,
              ehlo: session.hostNameAppearsAs,
            });
            for (const wake of waiters) wake();
            callback();
          },
          (error: Error) => callback(error),
        );
      };
    },
  });
  // A client killed in the middle of a message (a fault test stopping a mailer) resets its
  // connection, which smtp-server reports as an error of the server: for the sink, that message was
  // never received (onData above). Any other error stays uncaught and fails the test.
  server.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') throw error;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;

  return {
    url: `smtp://127.0.0.1:${port}${starttls ? '/?tls.rejectUnauthorized=false' : ''}`,
    messages,
    inFlight: () => inFlight,
    failNext(count, code = 451, command = 'DATA', text = 'Refused') {
      failures = { count, code, command, text };
    },
    waitFor(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = messages.find(predicate);
          if (!found) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`No matching email within ${timeoutMs} ms (received ${messages.length})`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
