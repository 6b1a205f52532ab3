import { flushCompileCache } from 'node:module';
import { loadOrExit, startOrExit, warnMisspelledVariables } from '@tessera/config';
import { closeGracefully, startOperationsServer } from '@tessera/telemetry';
import { buildApp } from './app.ts';
import { GatewayConfigSchema, listenHost, loadConfig } from './config.ts';

/**
 * The gateway process: configuration, the public port, the operations port (metrics and health, for
 * Prometheus and the orchestrator only), and a graceful close on SIGINT/SIGTERM.
 */
const config = loadOrExit(loadConfig);

const app = await startOrExit('gateway', '', buildApp(config));
warnMisspelledVariables(app.log, GatewayConfigSchema, process.env);
if (config.env !== 'production')
  app.log.warn(
    { appEnv: config.env },
    `APP_ENV=${config.env}: the send answer carries the code, so whoever reaches this gateway can sign in as anyone. Set APP_ENV=production to deploy.`,
  );

const operations = await startOrExit(
  'gateway',
  'OPS_HOST, OPS_PORT: ',
  startOperationsServer({
    host: config.http.opsHost,
    port: config.http.opsPort,
    checks: app.readiness,
  }),
);

closeGracefully({
  timeoutMs: config.shutdownTimeout * 1000,
  log: app.log,
  async close() {
    operations.drain();
    // Requests in flight finish; idle connections close, later requests are answered 503 (plugins/draining).
    await app.close();
    await operations.close();
    app.log.info('closed');
  },
});

// Every module is loaded: Node's copy of their compile cache (~12 MB of malloc) is freed, after it
// writes what the cache lacked. A no-op without NODE_COMPILE_CACHE.
flushCompileCache();

await startOrExit(
  'gateway',
  'HOST, PORT: ',
  app.listen({ port: config.http.port, host: listenHost(config) }),
);
app.log.info({ operations: operations.url }, 'operations port: /metrics, /health/live, /health/ready');
