import type { Socket } from 'node:net';
import fp from 'fastify-plugin';

// Node's own field: the response a connection is writing or about to write, null between requests.
type HttpSocket = Socket & { _httpMessage?: unknown };

/**
 * At most `max` connections to the public API: more are closed as they arrive (Node's
 * `maxConnections`), rather than fill the heap until it fails. Near the cap, connections idle between
 * two requests (kept alive for 72 s) are closed to make room: otherwise a client could fill the cap
 * with cheap requests, a 429 is one, and lock every new client out. A connection that has not sent
 * its first request yet is spared; it has REQUEST_TIMEOUT to send it.
 */
export default fp<{ max: number }>(
  async function connections(app, { max }) {
    const { server } = app;
    server.maxConnections = max;
    const open = new Set<HttpSocket>();
    const served = new WeakSet<Socket>();
    server.on('request', (request) => served.add(request.socket));
    server.on('connection', (socket: HttpSocket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
      if (open.size < Math.ceil(max * 0.9)) return;
      for (const other of open) if (served.has(other) && !other._httpMessage) other.destroy();
    });
  },
  { name: 'connections' },
);
