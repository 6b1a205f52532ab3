import fp from 'fastify-plugin';
import type { Clock } from '../clock.ts';
import type { GatewayConfig } from '../config.ts';

declare module 'fastify' {
  interface FastifyInstance {
    config: GatewayConfig;
    clock: Clock;
  }
}

/** Makes the validated configuration and the clock available to every plugin and module. */
export default fp<{ config: GatewayConfig; clock: Clock }>(
  async function configPlugin(app, { config, clock }) {
    app.decorate('config', config);
    app.decorate('clock', clock);
  },
  { name: 'config' },
);
