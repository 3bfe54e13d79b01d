<?php
// uds-lab's routes for PHP-FPM: one front controller behind nginx's
// fastcgi_pass. nginx strips the lab's path prefix (/tcp/, /uds/, ...) into
// PATH_INFO. Same routes, limits and JSON errors as the Go app
// (services/app/routes.go); the download routes are left out.
declare(strict_types=1);

const MAX_BYTES = 16 << 20;        // /bytes/:n, as the Go app
const MAX_SLEEP_MS = 10000;        // /sleep/:ms
const MAX_CPU_ITERATIONS = 1000000; // /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
const MAX_ECHOED = 100;            // bytes of a bad value or path echoed in an error

function answer(int $status, array $body): void
{
    http_response_code($status);
    header('Content-Type: application/json; charset=utf-8');
    echo json_encode($body, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
}

function truncated(string $s): string
{
    return strlen($s) > MAX_ECHOED ? substr($s, 0, MAX_ECHOED) . '...' : $s;
}

// intParam parses a path parameter as an integer in [lo, hi], as Go's
// strconv.ParseInt does (a sign and leading zeros allowed); on failure it
// answers 400 naming the parameter and the limit, and returns null.
function intParam(string $name, string $raw, int $lo, int $hi): ?int
{
    $shown = json_encode(truncated($raw), JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
    if (preg_match('/^[+-]?[0-9]+$/', $raw) !== 1) {
        answer(400, ['error' => "parameter $name=$shown is not an integer"]);
        return null;
    }
    // Beyond 64 bits intval would saturate: compare the digits instead.
    $digits = ltrim(ltrim($raw, '+-'), '0');
    $limit = $raw[0] === '-' ? '9223372036854775808' : '9223372036854775807';
    if (strlen($digits) > strlen($limit) || (strlen($digits) === strlen($limit) && strcmp($digits, $limit) > 0)) {
        answer(400, ['error' => "parameter $name=$shown is out of range: must be between $lo and $hi"]);
        return null;
    }
    $v = intval($raw, 10);
    if ($v < 0 && $lo >= 0) {
        $msg = "parameter $name=$v must not be negative";
    } elseif ($v < $lo) {
        $msg = "parameter $name=$v is below the minimum $lo";
    } elseif ($v > $hi) {
        $msg = "parameter $name=$v exceeds the maximum $hi";
    } else {
        return $v;
    }
    answer(400, ['error' => $msg]);
    return null;
}

$method = $_SERVER['REQUEST_METHOD'] ?? 'GET';
$path = $_SERVER['PATH_INFO'] ?? '/';
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
        answer(405, ['error' => "method $method not allowed for " . truncated($path)]);
        return;
    }
    switch ($route) {
        case 'ping':
            answer(200, ['message' => 'pong']);
            return;
        case 'healthz':
            answer(200, ['status' => 'ok']);
            return;
        case 'readyz':
            answer(200, ['status' => 'ready']);
            return;
        case 'bytes':
            if (($n = intParam('n', $m[1], 0, MAX_BYTES)) === null) {
                return;
            }
            // The Go app's pattern: byte i is (i % 255) + 1, never zero.
            $block = implode('', array_map('chr', range(1, 255)));
            header('Content-Type: application/octet-stream');
            header("Content-Length: $n");
            echo substr(str_repeat($block, intdiv($n, 255) + 1), 0, $n);
            return;
        case 'sleep':
            if (($ms = intParam('ms', $m[1], 0, MAX_SLEEP_MS)) === null) {
                return;
            }
            usleep($ms * 1000);
            answer(200, ['slept_ms' => $ms]);
            return;
        case 'cpu':
            if (($n = intParam('iterations', $m[1], 1, MAX_CPU_ITERATIONS)) === null) {
                return;
            }
            $state = str_repeat("\0", 32);
            for ($i = 0; $i < $n; $i++) {
                $state = hash('sha256', $state, true);
            }
            // Keys in the Go app's order (encoding/json sorts a map's keys).
            answer(200, ['digest' => bin2hex($state), 'iterations' => $n]);
            return;
    }
}
answer(404, ['error' => "no route for $method " . truncated($path)]);
