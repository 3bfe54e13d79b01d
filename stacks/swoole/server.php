<?php
// uds-lab's Swoole stack: Swoole's HTTP server (SWOOLE_PROCESS: a master
// whose reactor threads accept on both listeners and SWOOLE_WORKERS worker
// processes that answer), on TCP (APP_TCP_ADDR) and on the Unix socket
// (APP_UNIX_SOCKET), serving lab.php's routes. Started by the official image
// (phpswoole/swoole) as `php /app/server.php`; the test bed has no Swoole,
// so this file is checked there only for its syntax (php -l): see README.md.
declare(strict_types=1);

use Swoole\Coroutine;
use Swoole\Http\Request;
use Swoole\Http\Response;
use Swoole\Http\Server;

require __DIR__ . '/lab.php';

function fail(string $msg): never
{
    fwrite(STDERR, "swoole stack: $msg\n");
    exit(2);
}

// A socket file left by a crash is removed; one a live process answers on,
// or a file that is no socket, stops the start (as the Go app).
function remove_stale(string $path): void
{
    clearstatcache(true, $path);
    if (!file_exists($path) && !is_link($path)) {
        return;
    }
    if ((lstat($path)['mode'] & 0o170000) !== 0o140000) {
        fail("APP_UNIX_SOCKET=\"$path\": exists and is not a socket");
    }
    $c = @stream_socket_client("unix://$path", $errno, $errstr, 1.0);
    if ($c !== false) {
        fclose($c);
        fail("APP_UNIX_SOCKET=\"$path\": another process is listening on it");
    }
    if (!unlink($path)) {
        fail("APP_UNIX_SOCKET=\"$path\": a stale socket that cannot be removed");
    }
}

try {
    $cfg = lab_config(getenv());
} catch (LabSettingError $e) {
    fail($e->getMessage());
}
remove_stale($cfg['socket']);

// Swoole binds each listener as it is added: the socket is born with the
// mode (bind() applies the umask), restored once both listen (onStart).
$umask = umask(0o777 & ~$cfg['mode']);
$server = new Server($cfg['host'], $cfg['port'], SWOOLE_PROCESS, $cfg['ipv6'] ? SWOOLE_SOCK_TCP6 : SWOOLE_SOCK_TCP);
if ($server->addListener($cfg['socket'], 0, SWOOLE_SOCK_UNIX_STREAM) === false) {
    fail("APP_UNIX_SOCKET=\"{$cfg['socket']}\": cannot listen on it");
}
$server->set([
    'worker_num' => $cfg['workers'],
    // Kept connections answer at once: no 40 ms wait for a delayed ACK.
    'open_tcp_nodelay' => true,
    // The accept queue of both listeners (Swoole's default, said here:
    // make contract warns below 128).
    'backlog' => 512,
    // No heartbeat: idle kept connections stay until nginx closes them
    // (its upstream keepalive_timeout, 60 s), so nginx never sends on a
    // connection this side has just closed.
    'heartbeat_check_interval' => 0,
    // SIGTERM: workers finish the requests in flight for up to 15 s
    // (compose gives 20).
    'max_wait_time' => 15,
    'reload_async' => true,
    'http_compression' => false,
    'log_level' => SWOOLE_LOG_WARNING,
]);

$server->on('start', function (Server $s) use ($cfg, $umask): void {
    umask($umask);
    chmod($cfg['socket'], $cfg['mode']);
    if ($cfg['gid'] >= 0 && !chgrp($cfg['socket'], $cfg['gid'])) {
        fwrite(STDERR, "swoole stack: APP_SOCKET_GID={$cfg['gid']}: cannot give the socket that group\n");
        $s->shutdown();
        return;
    }
    fwrite(STDERR, sprintf("swoole stack: %d workers on %s:%d and %s (mode %o)\n",
        $cfg['workers'], $cfg['host'], $cfg['port'], $cfg['socket'], $cfg['mode']));
});

// After a stop (SIGTERM) the socket file goes with the listener.
$server->on('shutdown', function () use ($cfg): void {
    @unlink($cfg['socket']);
});

$server->on('request', function (Request $req, Response $res): void {
    // The path only, decoded: the query string plays no part in any route.
    $path = rawurldecode($req->server['request_uri'] ?? '/');
    [$status, $headers, $body, $sleepMs] = lab_route($req->getMethod(), $path);
    if ($sleepMs > 0) {
        Coroutine::sleep($sleepMs / 1000); // yields: the worker serves others meanwhile
    }
    $res->status($status);
    foreach ($headers as $k => $v) {
        $res->header($k, $v);
    }
    $res->end($body);
});

$server->start();
