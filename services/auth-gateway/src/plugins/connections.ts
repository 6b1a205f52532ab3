import { readFileSync } from 'node:fs';
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

// File descriptors the gateway needs besides its public connections and its Postgres pool: its own
// (~30 at rest: modules' files, pipes, epoll), the readiness probe's and Redis's connections, the
// operations port's, with room.
const OWN_DESCRIPTORS = 128;

/** The process's limit of open files (its RLIMIT_NOFILE, which Node raises to the hard limit), where Linux tells it. */
function openFileLimit(): number | undefined {
  try {
    const limit = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
    return limit === undefined ? undefined : Number(limit);
  } catch {
    return undefined;
  }
}

/**
 * At most `max` connections to the public API: more are closed as they arrive (Node's
 * `maxConnections`), rather than fill the heap until it fails. From 90 % of it on, every answer
 * closes its connection, and connections idle between two requests (kept alive for 72 s) are closed
 * (Node's own idea of idle, which spares one that has not finished sending a request): otherwise a
 * client could keep the cap filled with cheap requests, a 429 is one, and lock every new client out.
 */
export default fp<{ max: number; databasePool: number }>(
  async function connections(app, { max: wanted, databasePool }) {
    const { server } = app;
    // Fewer when the process may not open that many files with the rest: past its limit, every
    // connection would be closed as it arrives (the kernel's EMFILE, counted nowhere), the operations
    // port's probes and new Postgres connections among them.
    const limit = openFileLimit();
    const room = limit === undefined ? wanted : Math.max(1, limit - OWN_DESCRIPTORS - databasePool);
    const max = Math.min(wanted, room);
    if (max < wanted)
      app.log.warn(
        { maxConnections: wanted, openFileLimit: limit, kept: max },
        `MAX_CONNECTIONS (${wanted}) and the gateway's other connections need more files than this process may open (${limit}, ulimit -Hn): it keeps ${max} connections at most; raise the limit to keep ${wanted}`,
      );
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
