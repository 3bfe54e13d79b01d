'use strict';
// uds-lab's routes for Node.js: the built-in http module, one request handler
// served by one process on two listeners, TCP (APP_TCP_ADDR) and the Unix
// socket (APP_UNIX_SOCKET). Same routes, limits and JSON errors as the Go app
// (services/app/routes.go); the download routes are left out. No dependencies.
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');

const MAX_BYTES = 16 << 20; // /bytes/:n, as the Go app
const MAX_SLEEP_MS = 10000; // /sleep/:ms
const MAX_CPU_ITERATIONS = 1000000; // /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
const MAX_ECHOED = 100; // characters of a bad value or path echoed in an error
// Idle connections outlive nginx's (keepalive_timeout 60s), so nginx never
// sends on a connection this side has just closed (Node's default is 5 s).
const KEEPALIVE_MS = 120000;
// SIGTERM drains requests in flight for this long (compose gives 20 s).
const SHUTDOWN_MS = 15000;

function fail(msg) {
  console.error(`node stack: ${msg}`);
  process.exit(2);
}

// socketMode applies the lab's one rule for the socket's mode
// (contract/socket-modes.json): read and write for the owner (the app) and the
// group (nginx's), nothing for others, no bits beyond 0777. It returns the
// mode, or why it is refused.
function socketMode(s) {
  if (!/^(0o)?[0-7]+$/.test(s)) return 'must be an octal permission such as 0660';
  const m = parseInt(s.replace(/^0o/, ''), 8);
  if (m > 0o777) return 'must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)';
  if (m & 0o007) return 'must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID';
  if ((m & 0o060) !== 0o060) return "must give the group read and write (nginx's group connects through it)";
  if ((m & 0o600) !== 0o600) return 'must give the owner read and write (connecting needs write permission)';
  return m;
}

// config reads the lab's settings; a bad value stops the process naming it.
function config(env) {
  const tcp = env.APP_TCP_ADDR || ':8080';
  const i = tcp.lastIndexOf(':');
  const port = Number(tcp.slice(i + 1));
  if (i < 0 || !/^[0-9]+$/.test(tcp.slice(i + 1)) || port < 1 || port > 65535) {
    fail(`APP_TCP_ADDR="${tcp}": must be host:port or :port`);
  }
  const modeStr = env.APP_SOCKET_MODE || '0660';
  const mode = socketMode(modeStr);
  if (typeof mode === 'string') fail(`APP_SOCKET_MODE="${modeStr}": ${mode}`);
  const gidStr = env.APP_SOCKET_GID || '';
  if (gidStr !== '' && !/^[0-9]+$/.test(gidStr)) fail(`APP_SOCKET_GID="${gidStr}": must be a numeric group id`);
  return {
    host: tcp.slice(0, i).replace(/^\[(.*)\]$/, '$1') || undefined,
    port,
    socket: env.APP_UNIX_SOCKET || '/sock/app.sock',
    mode,
    gid: gidStr === '' ? -1 : Number(gidStr),
  };
}

// One payload built at start: byte i is (i % 255) + 1, the Go app's pattern.
const PAYLOAD = Buffer.alloc(MAX_BYTES);
for (let i = 0; i < MAX_BYTES; i++) PAYLOAD[i] = (i % 255) + 1;

class BadParam extends Error {}

const truncated = (s) => (s.length > MAX_ECHOED ? `${s.slice(0, MAX_ECHOED)}...` : s);

// intParam parses a path parameter as Go's strconv.ParseInt would, in [lo, hi].
function intParam(name, raw, lo, hi) {
  const shown = JSON.stringify(truncated(raw));
  if (!/^[+-]?[0-9]+$/.test(raw)) throw new BadParam(`parameter ${name}=${shown} is not an integer`);
  const big = BigInt(raw);
  if (big < -(2n ** 63n) || big >= 2n ** 63n) {
    throw new BadParam(`parameter ${name}=${shown} is out of range: must be between ${lo} and ${hi}`);
  }
  const v = String(big);
  if (big < 0n && lo >= 0) throw new BadParam(`parameter ${name}=${v} must not be negative`);
  if (big < BigInt(lo)) throw new BadParam(`parameter ${name}=${v} is below the minimum ${lo}`);
  if (big > BigInt(hi)) throw new BadParam(`parameter ${name}=${v} exceeds the maximum ${hi}`);
  return Number(big);
}

function json(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(data) });
  res.end(data);
}

const routes = [
  [/^\/ping$/, (req, res) => json(res, 200, { message: 'pong' })],
  [/^\/healthz$/, (req, res) => json(res, 200, { status: 'ok' })],
  [/^\/readyz$/, (req, res) => json(res, draining ? 503 : 200, { status: draining ? 'shutting down' : 'ready' })],
  [/^\/bytes\/([^/]+)$/, (req, res, raw) => {
    const n = intParam('n', raw, 0, MAX_BYTES);
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': n });
    res.end(PAYLOAD.subarray(0, n));
  }],
  [/^\/sleep\/([^/]+)$/, (req, res, raw) => {
    const ms = intParam('ms', raw, 0, MAX_SLEEP_MS);
    const timer = setTimeout(() => json(res, 200, { slept_ms: ms }), ms);
    // The client has gone: nobody reads the answer.
    res.on('close', () => clearTimeout(timer));
  }],
  [/^\/cpu\/([^/]+)$/, (req, res, raw) => {
    const n = intParam('iterations', raw, 1, MAX_CPU_ITERATIONS);
    let state = Buffer.alloc(32);
    for (let i = 0; i < n; i++) state = crypto.createHash('sha256').update(state).digest();
    // Keys in the Go app's order (encoding/json sorts a map's keys).
    json(res, 200, { digest: state.toString('hex'), iterations: n });
  }],
];

let draining = false;

function handle(req, res) {
  // The path only: the query string plays no part in any route.
  const raw = req.url.split('?', 1)[0];
  let path;
  try {
    path = decodeURIComponent(raw);
  } catch {
    path = raw;
  }
  for (const [pattern, route] of routes) {
    const m = pattern.exec(path);
    if (!m) continue;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return json(res, 405, { error: `method ${req.method} not allowed for ${truncated(path)}` });
    }
    try {
      return route(req, res, m[1]);
    } catch (e) {
      if (e instanceof BadParam) return json(res, 400, { error: e.message });
      throw e;
    }
  }
  return json(res, 404, { error: `no route for ${req.method} ${truncated(path)}` });
}

function newServer() {
  const server = http.createServer(handle);
  server.keepAliveTimeout = KEEPALIVE_MS;
  server.headersTimeout = KEEPALIVE_MS + 1000; // Node wants it above keepAliveTimeout
  return server;
}

// A socket file left by a crash is removed; one a live process answers on, or
// a file that is no socket, stops the start (as the Go app).
async function removeStale(path) {
  let st;
  try {
    st = fs.lstatSync(path);
  } catch (e) {
    if (e.code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) fail(`APP_UNIX_SOCKET="${path}": exists and is not a socket`);
  const live = await new Promise((resolve) => {
    const c = net.connect(path);
    c.on('connect', () => { c.destroy(); resolve(true); });
    c.on('error', () => resolve(false));
  });
  if (live) fail(`APP_UNIX_SOCKET="${path}": another process is listening on it`);
  fs.unlinkSync(path);
}

async function main() {
  const cfg = config(process.env);
  const tcp = newServer();
  const unix = newServer();
  await new Promise((resolve, reject) => tcp.once('error', reject).listen(cfg.port, cfg.host, resolve));
  await removeStale(cfg.socket);
  // The socket is born with cfg.mode: bind() applies the umask.
  const old = process.umask(0o777 & ~cfg.mode);
  try {
    await new Promise((resolve, reject) => unix.once('error', reject).listen(cfg.socket, resolve));
  } finally {
    process.umask(old);
  }
  if (cfg.gid >= 0) fs.chownSync(cfg.socket, -1, cfg.gid);
  console.error(`node stack: listening on ${cfg.host || '*'}:${cfg.port} and ${cfg.socket} (mode ${cfg.mode.toString(8)})`);

  const stop = (signal) => {
    if (draining) return;
    draining = true;
    console.error(`node stack: ${signal}: draining requests in flight`);
    let open = 2;
    const closed = () => { if (--open === 0) process.exit(0); };
    // close() stops accepting and waits for requests in flight; libuv removes
    // the socket file when the Unix listener closes.
    for (const s of [tcp, unix]) {
      s.close(closed);
      s.closeIdleConnections();
    }
    setTimeout(() => {
      console.error(`node stack: requests still in flight after ${SHUTDOWN_MS} ms: exiting`);
      process.exit(1);
    }, SHUTDOWN_MS).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => fail(e.message));
