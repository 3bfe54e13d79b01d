"""uds-lab's routes as a small WSGI app for gunicorn.

Same routes, limits and JSON errors as the Go app (services/app/routes.go);
the download routes are left out. Standard library only.
"""

import hashlib
import json
import re
import time

MAX_BYTES = 16 << 20  # /bytes/:n, as the Go app
MAX_SLEEP_MS = 10000  # /sleep/:ms
MAX_CPU_ITERATIONS = 1000000  # /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
MAX_ECHOED = 100  # characters of a bad value or path echoed in an error

# One payload built at import (gunicorn.conf.py preloads the app, so the
# workers share it): byte i is (i % 255) + 1, the Go app's pattern.
PAYLOAD = (bytes(range(1, 256)) * (MAX_BYTES // 255 + 1))[:MAX_BYTES]
INT = re.compile(r"[+-]?[0-9]+\Z")


class BadParam(Exception):
    pass


def truncated(s):
    return s[:MAX_ECHOED] + "..." if len(s) > MAX_ECHOED else s


def int_param(name, raw, lo, hi):
    """Parses a path parameter as Go's strconv.ParseInt would, in [lo, hi]."""
    shown = json.dumps(truncated(raw))
    if not INT.match(raw):
        raise BadParam(f"parameter {name}={shown} is not an integer")
    v = int(raw, 10)
    if not -(2**63) <= v < 2**63:
        raise BadParam(f"parameter {name}={shown} is out of range: must be between {lo} and {hi}")
    if v < 0 and lo >= 0:
        raise BadParam(f"parameter {name}={v} must not be negative")
    if v < lo:
        raise BadParam(f"parameter {name}={v} is below the minimum {lo}")
    if v > hi:
        raise BadParam(f"parameter {name}={v} exceeds the maximum {hi}")
    return v


def as_json(status, body):
    data = json.dumps(body, separators=(",", ":")).encode()
    return status, "application/json; charset=utf-8", data


def ping(_):
    return as_json("200 OK", {"message": "pong"})


def healthz(_):
    return as_json("200 OK", {"status": "ok"})


def readyz(_):
    return as_json("200 OK", {"status": "ready"})


def get_bytes(raw):
    n = int_param("n", raw, 0, MAX_BYTES)
    # gunicorn writes bytes only (not a memoryview): a slice is a copy of n bytes.
    return "200 OK", "application/octet-stream", PAYLOAD[:n]


def sleep(raw):
    ms = int_param("ms", raw, 0, MAX_SLEEP_MS)
    time.sleep(ms / 1000)
    return as_json("200 OK", {"slept_ms": ms})


def cpu(raw):
    n = int_param("iterations", raw, 1, MAX_CPU_ITERATIONS)
    state = bytes(32)
    for _ in range(n):
        state = hashlib.sha256(state).digest()
    # Keys in the Go app's order (encoding/json sorts a map's keys).
    return as_json("200 OK", {"digest": state.hex(), "iterations": n})


ROUTES = [
    (re.compile(r"/ping\Z"), ping),
    (re.compile(r"/bytes/([^/]+)\Z"), get_bytes),
    (re.compile(r"/sleep/([^/]+)\Z"), sleep),
    (re.compile(r"/cpu/([^/]+)\Z"), cpu),
    (re.compile(r"/healthz\Z"), healthz),
    (re.compile(r"/readyz\Z"), readyz),
]


def route(method, path):
    for pattern, handler in ROUTES:
        m = pattern.match(path)
        if not m:
            continue
        if method not in ("GET", "HEAD"):
            return as_json("405 Method Not Allowed", {"error": f"method {method} not allowed for {truncated(path)}"})
        try:
            return handler(m.group(1) if m.groups() else None)
        except BadParam as e:
            return as_json("400 Bad Request", {"error": str(e)})
    return as_json("404 Not Found", {"error": f"no route for {method} {truncated(path)}"})


def application(environ, start_response):
    # PATH_INFO is decoded as latin-1 by WSGI; as UTF-8 it reads as the Go app's.
    path = environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "replace")
    status, content_type, body = route(environ["REQUEST_METHOD"], path)
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
