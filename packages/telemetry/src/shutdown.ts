/** Where register.ts leaves the SDK's shutdown, for the process's close handler to call. */
export const SHUTDOWN = Symbol.for('tessera.telemetry.shutdown');

/** Sends the spans still buffered and stops the SDK; does nothing when register.ts was not loaded. */
export async function shutdownTelemetry(): Promise<void> {
  const shutdown = (globalThis as { [SHUTDOWN]?: () => Promise<void> })[SHUTDOWN];
  await shutdown?.().catch(() => undefined);
}
