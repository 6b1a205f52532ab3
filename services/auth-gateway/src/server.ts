import { loadOrExit } from '@tessera/config';
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
  await app.close();
});

await app.listen({ port: config.PORT, host: config.HOST });
