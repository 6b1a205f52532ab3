import { loadOrExit } from '@tessera/config';
import { shutdownTelemetry } from '@tessera/telemetry';
import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';

/** The gateway process: configuration, listen, graceful close on SIGINT/SIGTERM. */
const config = loadOrExit(loadConfig);

const app = await buildApp(config).catch((error: Error) => {
  console.error(`Tessera gateway failed to start: ${error.message}`);
  process.exit(1);
});

closeWithGrace({ delay: 10_000 }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'closing after an error');
  else app.log.info({ signal }, 'closing');
  // A keep-alive connection goes idle once its last request is answered: close it then, not when the
  // client gets round to it.
  const closeIdle = setInterval(() => app.server.closeIdleConnections(), 100);
  try {
    await app.close();
  } finally {
    clearInterval(closeIdle);
  }
  await shutdownTelemetry();
});

await app.listen({ port: config.PORT, host: config.HOST });
