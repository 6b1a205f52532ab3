import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { SMTPServer } from 'smtp-server';

/** An SMTP server on loopback that accepts everything and notes when each recipient's message was accepted. */
export interface SmtpSink {
  url: string;
  /** performance.now() of the acceptance, by recipient address. */
  accepted: Map<string, number>;
  /** Resolves once every address has been accepted, or rejects after `timeoutMs` naming how many were. */
  waitFor(addresses: readonly string[], timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Cheaper than @tessera/testing's sink on purpose: no parsing and no reverse DNS, so what is measured
 * is the mailer, not the server it talks to.
 */
export async function startSmtpSink(): Promise<SmtpSink> {
  const accepted = new Map<string, number>();
  const waiters = new Set<(address: string) => void>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    disableReverseLookup: true,
    logger: false,
    onData(stream, session, callback) {
      stream.resume();
      stream.on('end', () => {
        const now = performance.now();
        // Read before answering: the answer resets the session's envelope.
        const recipients = session.envelope.rcptTo.map(({ address }) => address);
        callback();
        for (const address of recipients) {
          accepted.set(address, now);
          for (const wake of waiters) wake(address);
        }
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;

  return {
    url: `smtp://127.0.0.1:${port}`,
    accepted,
    waitFor(addresses, timeoutMs) {
      return new Promise((resolve, reject) => {
        const missing = new Set(addresses.filter((address) => !accepted.has(address)));
        const check = (address?: string) => {
          if (address !== undefined) missing.delete(address);
          if (missing.size > 0) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`${addresses.length - missing.size} of ${addresses.length} emails in ${timeoutMs} ms`),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
