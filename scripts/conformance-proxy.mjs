// A loopback reverse proxy for scripts/conformance.sh.
//
// The MCP conformance suite (`conformance server --url ...`) has no way to send an
// `Authorization` header, and `cairn daemon` answers 401 without one. This proxy listens
// on 127.0.0.1:LISTEN_PORT, forwards every request to 127.0.0.1:TARGET_PORT with
// `Authorization: Bearer $CAIRN_TOKEN` set (any incoming Authorization header is
// replaced), and streams the answer back unchanged.
//
// It changes nothing else: the `Host` header keeps its name and only has its port
// rewritten to the daemon's (so that the daemon's Host check, which also compares ports,
// sees what a direct client would send, while the suite's DNS-rebinding scenario still
// reaches the daemon with `Host: evil.example.com`), and `Origin` passes through as is.
//
// usage: CAIRN_TOKEN=... node conformance-proxy.mjs LISTEN_PORT TARGET_PORT
// LISTEN_PORT 0 lets the system pick one; the port listened on is printed on stdout.
import http from 'node:http';

const [wantPort, targetPort] = process.argv.slice(2).map(Number);
const token = process.env.CAIRN_TOKEN;
let listenPort = wantPort;
if (!Number.isInteger(wantPort) || !targetPort || !token) {
  console.error('usage: CAIRN_TOKEN=... node conformance-proxy.mjs LISTEN_PORT TARGET_PORT');
  process.exit(2);
}

// Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded.
const HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te',
  'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate',
]);

const agent = new http.Agent({ keepAlive: true });

const server = http.createServer((req, res) => {
  // Keep repeated headers repeated (rawHeaders is [name, value, name, value, ...]).
  const headers = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    let value = req.rawHeaders[i + 1];
    const lower = name.toLowerCase();
    if (HOP.has(lower) || lower === 'authorization') continue;
    if (lower === 'host') {
      value = value.replace(new RegExp(`:${listenPort}$`), `:${targetPort}`);
    }
    headers.push(name, value);
  }
  headers.push('Authorization', `Bearer ${token}`);

  const upstream = http.request(
    {
      host: '127.0.0.1',
      port: targetPort,
      method: req.method,
      path: req.url,
      headers,
      agent,
      setHost: false,
    },
    (up) => {
      const out = [];
      for (let i = 0; i < up.rawHeaders.length; i += 2) {
        if (!HOP.has(up.rawHeaders[i].toLowerCase())) {
          out.push(up.rawHeaders[i], up.rawHeaders[i + 1]);
        }
      }
      res.writeHead(up.statusCode, up.statusMessage, out);
      res.flushHeaders();
      up.pipe(res);
    },
  );
  upstream.on('error', (err) => {
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'text/plain' });
    }
    res.end(`conformance proxy: ${err.message}\n`);
  });
  // A client that goes away (an SSE reader cancelled) ends the upstream request too.
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});

server.listen(wantPort, '127.0.0.1', () => {
  listenPort = server.address().port;
  console.log(String(listenPort));
  console.error(`conformance proxy: 127.0.0.1:${listenPort} -> 127.0.0.1:${targetPort}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => process.exit(0));
}
