import { isIP } from 'node:net';
import fp from 'fastify-plugin';

// A proxy that writes the client's port too: `203.0.113.7:51234`, `[2001:db8::1]:51234`.
const WITH_PORT = /^(?:\[([^\]]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):\d{1,5}$/;

/** The address in `entry` (an X-Forwarded-For entry), or undefined when it holds none. */
export function addressOf(entry: string): string | undefined {
  // An IPv6 zone (`fe80::1%eth0`) names an interface of the sender's own machine, in any words.
  if (entry.includes('%')) return undefined;
  if (isIP(entry)) return entry;
  const [, v6, v4] = WITH_PORT.exec(entry) ?? [];
  const bare = v6 ?? v4;
  return bare && isIP(bare) ? bare : undefined;
}

/**
 * Behind `TRUST_PROXY` the client IP is the `X-Forwarded-For` entry the setting picks: text that a
 * client reaching the gateway past its proxies writes itself. An entry that is no IP address is not
 * taken: the request is counted and recorded as its connection's peer's, rather than in a limit of
 * its own or as words in a user's security events.
 */
export default fp<{ behindProxy: boolean }>(
  async function clientAddress(app, { behindProxy }) {
    if (!behindProxy) return;
    app.addHook('onRequest', (request, _reply, done) => {
      const address = addressOf(request.ip);
      if (address !== request.ip)
        Object.defineProperty(request, 'ip', { value: address ?? request.socket.remoteAddress ?? '' });
      done();
    });
  },
  { name: 'client-address' },
);
