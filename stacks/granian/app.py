"""uds-lab's routes as a plain ASGI app for granian (no framework).

Same routes, limits and JSON errors as the Go app (services/app/routes.go);
the download routes are left out. Standard library only.
"""

import asyncio
import hashlib
import json
import re

MAX_BYTES = 16 << 20  # /bytes/:n, as the Go app
MAX_SLEEP_MS = 10000  # /sleep/:ms
MAX_CPU_ITERATIONS = 1000000  # /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
MAX_ECHOED = 100  # characters of a bad value or path echoed in an error

# One payload built at import (in each worker): byte i is (i % 255) + 1, the
# Go app's pattern.
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
    return status, b"application/json; charset=utf-8", json.dumps(body, separators=(",", ":")).encode()


async def ping(_):
    return as_json(200, {"message": "pong"})


async def healthz(_):
    return as_json(200, {"status": "ok"})


async def readyz(_):
    return as_json(200, {"status": "ready"})


async def get_bytes(raw):
    n = int_param("n", raw, 0, MAX_BYTES)
    # ASGI sends bytes: a slice is a copy of n bytes.
    return 200, b"application/octet-stream", PAYLOAD[:n]


async def sleep(raw):
    ms = int_param("ms", raw, 0, MAX_SLEEP_MS)
    await asyncio.sleep(ms / 1000)
    return as_json(200, {"slept_ms": ms})


async def cpu(raw):
    n = int_param("iterations", raw, 1, MAX_CPU_ITERATIONS)
    # On the event loop, as a CPU-bound handler runs in an async app: the
    # worker answers nothing else meanwhile.
    state = bytes(32)
    for _ in range(n):
        state = hashlib.sha256(state).digest()
    # Keys in the Go app's order (encoding/json sorts a map's keys).
    return as_json(200, {"digest": state.hex(), "iterations": n})


ROUTES = [
    (re.compile(r"/ping\Z"), ping),
    (re.compile(r"/bytes/([^/]+)\Z"), get_bytes),
    (re.compile(r"/sleep/([^/]+)\Z"), sleep),
    (re.compile(r"/cpu/([^/]+)\Z"), cpu),
    (re.compile(r"/healthz\Z"), healthz),
    (re.compile(r"/readyz\Z"), readyz),
]


async def route(method, path):
    for pattern, handler in ROUTES:
        m = pattern.match(path)
        if not m:
            continue
        if method not in ("GET", "HEAD"):
            return as_json(405, {"error": f"method {method} not allowed for {truncated(path)}"})
        try:
            return await handler(m.group(1) if m.groups() else None)
        except BadParam as e:
            return as_json(400, {"error": str(e)})
    return as_json(404, {"error": f"no route for {method} {truncated(path)}"})


async def app(scope, receive, send):
    """The ASGI application: HTTP only (serve.py runs granian's asginl
    interface: no lifespan events)."""
    if scope["type"] != "http":
        raise RuntimeError(f"unsupported ASGI scope {scope['type']}")
    # scope["path"] is percent-decoded UTF-8, as the Go app routes it.
    status, content_type, body = await route(scope["method"], scope["path"])
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
