import type { Socket } from 'node:net';
import { meter } from '@tessera/telemetry';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** The connections to the public API open now. */
    connections: ReadonlySet<Socket>;
  }
}

const refused = meter.createCounter('tessera.http.connections.refused', {
  description: 'Connections to the public API closed as they arrived: the process held MAX_CONNECTIONS',
});
const openGauge = meter.createObservableGauge('tessera.http.connections.open', {
  description: 'Connections to the public API open now (at most MAX_CONNECTIONS)',
});

/**
 * At most `max` connections to the public API: more are closed as they arrive (Node's
 * `maxConnections`), rather than fill the heap until it fails. From 90 % of it on, every answer
 * closes its connection, and connections idle between two requests (kept alive for 72 s) are closed
 * (Node's own idea of idle, which spares one that has not finished sending a request): otherwise a
 * client could keep the cap filled with cheap requests, a 429 is one, and lock every new client out.
 */
export default fp<{ max: number }>(
  async function connections(app, { max }) {
    const { server } = app;
    server.maxConnections = max;
    const crowded = Math.ceil(max * 0.9);
    const open = new Set<Socket>();
    app.decorate('connections', open);
    refused.add(0);
    let lastSweep = 0;
    // At most ten sweeps a second: each walks every connection.
    const sweep = () => {
      const now = performance.now();
      if (now - lastSweep < 100) return;
      lastSweep = now;
      server.closeIdleConnections();
    };
    server.on('connection', (socket: Socket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
      if (open.size >= crowded) sweep();
    });
    // Refused at the cap: the next one finds room.
    server.on('drop', () => {
      refused.add(1);
      sweep();
    });
    const observe = (result: { observe(value: number): void }) => result.observe(open.size);
    openGauge.addCallback(observe);
    app.addHook('onClose', async () => openGauge.removeCallback(observe));
    app.addHook('onSend', (_request, reply, _payload, done) => {
      if (open.size >= crowded) reply.header('connection', 'close');
      done();
    });
  },
  { name: 'connections' },
);
