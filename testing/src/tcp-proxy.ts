import { once } from 'node:events';
import net from 'node:net';

export interface TcpProxy {
  /** `url` with its host and port replaced by the proxy's. */
  through(url: string): string;
  /** The connections open through it. */
  connections(): number;
  /**
   * Resets every connection through it, as a network fault or a load balancer does: the client gets
   * an RST, the server a FIN.
   */
  reset(): void;
  /**
   * Holds what either side sends, connections open, as a frozen host or a partition does; new
   * connections are held too. `thaw` delivers it all. Each is a no-op when already so.
   */
  freeze(): void;
  thaw(): void;
  /**
   * Forgets the connections open now, as a NAT or firewall that dropped their state does: what
   * either side sends on them goes nowhere, and neither is told; new connections pass.
   */
  abandon(): void;
  /**
   * Abandons a connection, as `abandon` does, once what its client has sent so far satisfies `when`
   * (given it, case-folded, from the time `when` is set, and the connection's rank among those the
   * proxy took, from 0): what comes after, and the server's answer to it, go nowhere.
   */
  abandonWhen(when: (sent: string, rank: number) => boolean): void;
  close(): Promise<void>;
}

/** A TCP proxy in front of a server, to cut the connections of one client while the server runs on. */
export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  const clients = new Set<net.Socket>();
  // Each direction of each connection: what `from` reads is written to `to`.
  const flows = new Set<readonly [net.Socket, net.Socket]>();
  let frozen = false;
  let abandonWhen: ((sent: string, rank: number) => boolean) | undefined;
  let accepted = 0;
  /** What either side sends on it from now on goes nowhere, and neither is told. */
  const abandonFlow = (flow: readonly [net.Socket, net.Socket]) => {
    if (!flows.delete(flow)) return;
    flow[0].unpipe(flow[1]);
    flow[0].pause();
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    clients.add(client);
    client.on('close', () => clients.delete(client));
    const rank = accepted++;
    let sent = '';
    const connectionFlows = [
      [client, upstream],
      [upstream, client],
    ] as const;
    // Before the pipe's own listener: the chunk that satisfies `abandonWhen` still reaches the
    // server, whose answer is then held.
    client.on('data', (chunk: Buffer) => {
      if (!abandonWhen) return;
      sent += chunk.toString('latin1').toLowerCase();
      if (abandonWhen(sent, rank)) for (const flow of connectionFlows) abandonFlow(flow);
    });
    for (const flow of connectionFlows) {
      const [from, to] = flow;
      flows.add(flow);
      if (frozen) from.pause();
      else from.pipe(to);
      from.on('error', () => to.destroy());
      from.on('close', () => {
        flows.delete(flow);
        to.destroy();
      });
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port: own } = server.address() as net.AddressInfo;
  const proxy: TcpProxy = {
    through(url) {
      const proxied = new URL(url);
      proxied.host = `127.0.0.1:${own}`;
      return proxied.toString();
    },
    connections: () => clients.size,
    reset() {
      for (const client of clients) client.resetAndDestroy();
    },
    freeze() {
      if (frozen) return;
      frozen = true;
      for (const [from, to] of flows) {
        from.unpipe(to);
        from.pause();
      }
    },
    thaw() {
      if (!frozen) return;
      frozen = false;
      for (const [from, to] of flows) from.pipe(to);
    },
    abandon() {
      for (const flow of flows) abandonFlow(flow);
    },
    abandonWhen(when) {
      abandonWhen = when;
    },
    async close() {
      proxy.reset();
      const closed = once(server, 'close');
      server.close();
      await closed;
    },
  };
  return proxy;
}
