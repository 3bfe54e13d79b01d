<?php
// uds-lab's routes and settings for the Swoole stack, in plain PHP with no
// Swoole in it, so that the test bed (which cannot have Swoole) runs them on
// Debian's php-cli: tests/static checks the contract's routes and the
// socket's modes against these functions; server.php serves them with
// Swoole. Same routes, limits and JSON errors as the Go app
// (services/app/routes.go); the download routes are left out.
declare(strict_types=1);

const LAB_MAX_BYTES = 16 << 20;        // /bytes/:n, as the Go app
const LAB_MAX_SLEEP_MS = 10000;        // /sleep/:ms
const LAB_MAX_CPU_ITERATIONS = 1000000; // /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
const LAB_MAX_ECHOED = 100;            // bytes of a bad value or path echoed in an error
const LAB_JSON = JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE;

final class LabSettingError extends InvalidArgumentException
{
}

final class LabBadParam extends InvalidArgumentException
{
}

// lab_socket_mode applies the lab's one rule for the socket's mode
// (contract/socket-modes.json): read and write for the owner (the app) and
// the group (nginx's), nothing for others, no bits beyond 0777. It returns
// the mode, or why it is refused.
function lab_socket_mode(string $s): int|string
{
    if (preg_match('/^(0o)?[0-7]+$/', $s) !== 1) {
        return 'must be an octal permission such as 0660';
    }
    $m = intval(preg_replace('/^0o/', '', $s), 8);
    if ($m > 0o777) {
        return 'must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)';
    }
    if (($m & 0o007) !== 0) {
        return 'must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID';
    }
    if (($m & 0o060) !== 0o060) {
        return "must give the group read and write (nginx's group connects through it)";
    }
    if (($m & 0o600) !== 0o600) {
        return 'must give the owner read and write (connecting needs write permission)';
    }
    return $m;
}

// lab_config reads the lab's settings from an environment (getenv()); a bad
// value throws LabSettingError naming it.
function lab_config(array $env): array
{
    $tcp = ($env['APP_TCP_ADDR'] ?? '') !== '' ? $env['APP_TCP_ADDR'] : ':8080';
    $i = strrpos($tcp, ':');
    $portStr = $i === false ? '' : substr($tcp, $i + 1);
    if ($i === false || preg_match('/^[0-9]+$/', $portStr) !== 1 || (int) $portStr < 1 || (int) $portStr > 65535) {
        throw new LabSettingError("APP_TCP_ADDR=\"$tcp\": must be host:port or :port");
    }
    $host = trim(substr($tcp, 0, $i), '[]');
    $modeStr = ($env['APP_SOCKET_MODE'] ?? '') !== '' ? $env['APP_SOCKET_MODE'] : '0660';
    $mode = lab_socket_mode($modeStr);
    if (is_string($mode)) {
        throw new LabSettingError("APP_SOCKET_MODE=\"$modeStr\": $mode");
    }
    $gidStr = $env['APP_SOCKET_GID'] ?? '';
    if ($gidStr !== '' && preg_match('/^[0-9]+$/', $gidStr) !== 1) {
        throw new LabSettingError("APP_SOCKET_GID=\"$gidStr\": must be a numeric group id");
    }
    $workersStr = ($env['SWOOLE_WORKERS'] ?? '') !== '' ? $env['SWOOLE_WORKERS'] : '4';
    if (preg_match('/^[0-9]+$/', $workersStr) !== 1 || (int) $workersStr < 1 || (int) $workersStr > 256) {
        throw new LabSettingError("SWOOLE_WORKERS=\"$workersStr\": must be a whole number from 1 to 256");
    }
    return [
        'host' => $host === '' ? '0.0.0.0' : $host,
        'ipv6' => str_contains($host, ':'),
        'port' => (int) $portStr,
        'socket' => ($env['APP_UNIX_SOCKET'] ?? '') !== '' ? $env['APP_UNIX_SOCKET'] : '/sock/app.sock',
        'mode' => $mode,
        'gid' => $gidStr === '' ? -1 : (int) $gidStr,
        'workers' => (int) $workersStr,
    ];
}

function lab_truncated(string $s): string
{
    return strlen($s) > LAB_MAX_ECHOED ? substr($s, 0, LAB_MAX_ECHOED) . '...' : $s;
}

// lab_int_param parses a path parameter as an integer in [lo, hi], as Go's
// strconv.ParseInt does (a sign and leading zeros allowed), or throws
// LabBadParam naming the parameter and the limit.
function lab_int_param(string $name, string $raw, int $lo, int $hi): int
{
    $shown = json_encode(lab_truncated($raw), LAB_JSON);
    if (preg_match('/^[+-]?[0-9]+$/', $raw) !== 1) {
        throw new LabBadParam("parameter $name=$shown is not an integer");
    }
    // Beyond 64 bits intval would saturate: compare the digits instead.
    $digits = ltrim(ltrim($raw, '+-'), '0');
    $limit = $raw[0] === '-' ? '9223372036854775808' : '9223372036854775807';
    if (strlen($digits) > strlen($limit) || (strlen($digits) === strlen($limit) && strcmp($digits, $limit) > 0)) {
        throw new LabBadParam("parameter $name=$shown is out of range: must be between $lo and $hi");
    }
    $v = intval($raw, 10);
    if ($v < 0 && $lo >= 0) {
        throw new LabBadParam("parameter $name=$v must not be negative");
    }
    if ($v < $lo) {
        throw new LabBadParam("parameter $name=$v is below the minimum $lo");
    }
    if ($v > $hi) {
        throw new LabBadParam("parameter $name=$v exceeds the maximum $hi");
    }
    return $v;
}

// lab_json is a JSON answer: [status, headers, body, sleep ms].
function lab_json(int $status, array $body, int $sleepMs = 0): array
{
    return [$status, ['Content-Type' => 'application/json; charset=utf-8'], json_encode($body, LAB_JSON), $sleepMs];
}

// lab_payload: the Go app's byte pattern, byte i is (i % 255) + 1, built once.
function lab_payload(): string
{
    static $payload = null;
    if ($payload === null) {
        $block = implode('', array_map('chr', range(1, 255)));
        $payload = substr(str_repeat($block, intdiv(LAB_MAX_BYTES, 255) + 1), 0, LAB_MAX_BYTES);
    }
    return $payload;
}

// lab_route answers one request: [status, headers, body, ms to wait before
// answering] (the server waits without blocking its worker: /sleep).
function lab_route(string $method, string $path): array
{
    $routes = [
        '#^/ping$#' => 'ping',
        '#^/bytes/([^/]+)$#' => 'bytes',
        '#^/sleep/([^/]+)$#' => 'sleep',
        '#^/cpu/([^/]+)$#' => 'cpu',
        '#^/healthz$#' => 'healthz',
        '#^/readyz$#' => 'readyz',
    ];
    foreach ($routes as $pattern => $route) {
        if (preg_match($pattern, $path, $m) !== 1) {
            continue;
        }
        if ($method !== 'GET' && $method !== 'HEAD') {
            return lab_json(405, ['error' => "method $method not allowed for " . lab_truncated($path)]);
        }
        try {
            switch ($route) {
                case 'ping':
                    return lab_json(200, ['message' => 'pong']);
                case 'healthz':
                    return lab_json(200, ['status' => 'ok']);
                case 'readyz':
                    return lab_json(200, ['status' => 'ready']);
                case 'bytes':
                    $n = lab_int_param('n', $m[1], 0, LAB_MAX_BYTES);
                    return [200, ['Content-Type' => 'application/octet-stream'], substr(lab_payload(), 0, $n), 0];
                case 'sleep':
                    $ms = lab_int_param('ms', $m[1], 0, LAB_MAX_SLEEP_MS);
                    return lab_json(200, ['slept_ms' => $ms], $ms);
                case 'cpu':
                    $n = lab_int_param('iterations', $m[1], 1, LAB_MAX_CPU_ITERATIONS);
                    $state = str_repeat("\0", 32);
                    for ($i = 0; $i < $n; $i++) {
                        $state = hash('sha256', $state, true);
                    }
                    // Keys in the Go app's order (encoding/json sorts a map's keys).
                    return lab_json(200, ['digest' => bin2hex($state), 'iterations' => $n]);
            }
        } catch (LabBadParam $e) {
            return lab_json(400, ['error' => $e->getMessage()]);
        }
    }
    return lab_json(404, ['error' => "no route for $method " . lab_truncated($path)]);
}
