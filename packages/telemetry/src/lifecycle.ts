import { shutdownTelemetry } from './shutdown.ts';

interface Log {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

interface GracefulCloseOptions {
  /** How long the drain may take: past it the process exits 1 (at once, or at the next signal). */
  timeoutMs: number;
  log: Log;
  /** Stops taking work and finishes what is in flight. */
  close: () => Promise<void>;
}

/**
 * SIGTERM or SIGINT, once or many times (a process group, `concurrently`, Docker and Kubernetes all
 * repeat them), drains once and exits 0; the buffered spans are sent last. Only the drain deadline
 * passing forces exit 1. A crash (an uncaught error) drains the same way and exits 1, and so does
 * the function returned, for a process that cannot go on (its cause logged by the caller).
 */
export function closeGracefully({ timeoutMs, log, close }: GracefulCloseOptions): () => void {
  let closing: Promise<void> | undefined;
  let deadline = Number.POSITIVE_INFINITY;

  function drain(code: number) {
    deadline = performance.now() + timeoutMs;
    setTimeout(() => {
      log.error({ timeoutMs }, 'drain deadline passed; exiting');
      process.exit(1);
    }, timeoutMs).unref();
    closing = close()
      .then(() => shutdownTelemetry())
      .then(
        () => process.exit(code),
        (err: unknown) => {
          log.error({ err }, 'closing failed');
          process.exit(1);
        },
      );
  }

  const onSignal = (signal: NodeJS.Signals) => {
    if (closing === undefined) {
      log.info({ signal }, 'closing: finishing the work in flight');
      drain(0);
    } else if (performance.now() >= deadline) {
      process.exit(1);
    } else {
      log.info({ signal }, 'already closing');
    }
  };
  const onCrash = (err: unknown) => {
    log.error({ err }, 'closing after an uncaught error');
    if (closing !== undefined) process.exit(1);
    else drain(1);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  return () => {
    if (closing === undefined) drain(1);
  };
}
