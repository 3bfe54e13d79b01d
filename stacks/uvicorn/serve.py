"""uvicorn for uds-lab: app.py on TCP (APP_TCP_ADDR) and the Unix socket
(APP_UNIX_SOCKET) at once, in UVICORN_WORKERS worker processes.

uvicorn's command line takes one listener (--host/--port, or --uds, or --fd),
so this binds both, as `uvicorn --uds` does the socket, but born with the
lab's mode, and hands them to uvicorn's own supervisor (the one `--workers`
runs), which starts the workers on them. A bad value stops the start with a
message naming it, before anything listens.
"""

import inspect
import os
import socket
import stat
import sys

import uvicorn
from uvicorn.supervisors import Multiprocess

# Idle connections outlive nginx's (keepalive_timeout 60s), so nginx never
# sends on a connection uvicorn has just closed (uvicorn's default is 5 s).
KEEPALIVE_S = 120
# SIGTERM drains requests in flight for this long (compose gives 20 s).
SHUTDOWN_S = 15


def setting(name, default):
    return os.environ.get(name) or default


def fail(msg):
    print(f"uvicorn stack: {msg}", file=sys.stderr)
    sys.exit(2)


def socket_mode(s):
    """The lab's one rule for the socket's mode (contract/socket-modes.json):
    read and write for the owner (the app) and the group (nginx's), nothing
    for others. Returns the mode, or why it is refused."""
    digits = s.removeprefix("0o")
    if not digits or digits.strip("01234567"):
        return "must be an octal permission such as 0660"
    m = int(digits, 8)
    if m > 0o777:
        return "must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)"
    if m & 0o007:
        return "must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID"
    if m & 0o060 != 0o060:
        return "must give the group read and write (nginx's group connects through it)"
    if m & 0o600 != 0o600:
        return "must give the owner read and write (connecting needs write permission)"
    return m


def read_settings():
    tcp = setting("APP_TCP_ADDR", ":8080")
    host, _, port = tcp.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        fail(f'APP_TCP_ADDR="{tcp}": must be host:port or :port')
    mode_s = setting("APP_SOCKET_MODE", "0660")
    mode = socket_mode(mode_s)
    if isinstance(mode, str):
        fail(f'APP_SOCKET_MODE="{mode_s}": {mode}')
    gid = os.environ.get("APP_SOCKET_GID") or None
    if gid is not None and not gid.isdigit():
        fail(f'APP_SOCKET_GID="{gid}": must be a numeric group id')
    workers = setting("UVICORN_WORKERS", "4")
    if not workers.isdigit() or int(workers) < 1:
        fail(f'UVICORN_WORKERS="{workers}": must be a whole number >= 1')
    return {
        "host": host.strip("[]") or "0.0.0.0",
        "port": int(port),
        "socket": setting("APP_UNIX_SOCKET", "/sock/app.sock"),
        "mode": mode,
        "gid": None if gid is None else int(gid),
        "workers": int(workers),
    }


def bind_tcp(host, port, backlog):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on a socket whose
    # protocol says TCP. uvicorn's own --workers binds with protocol 0, so its
    # connections keep Nagle's algorithm, and on a kept connection each answer
    # (headers and body: two writes) waits for nginx's delayed ACK, about
    # 40 ms (README.md).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


def remove_stale(path):
    """A socket file left by a crash is removed; one a live process answers
    on, or a file that is no socket, stops the start (as the Go app)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        fail(f'APP_UNIX_SOCKET="{path}": exists and is not a socket')
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)
    else:
        fail(f'APP_UNIX_SOCKET="{path}": another process is listening on it')
    finally:
        probe.close()


def bind_unix(path, mode, gid, backlog):
    remove_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # The socket is born with the mode: bind() applies the umask. (uvicorn's
    # own --uds makes it 0666, for everyone.) Its group is the process's (in
    # compose APP_GID, nginx workers'), or APP_SOCKET_GID.
    old = os.umask(0o777 & ~mode)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    if gid is not None:
        os.chown(path, -1, gid)
    sock.listen(backlog)
    return sock, os.stat(path).st_ino


def main():
    s = read_settings()
    options = {
        "app": "app:app",  # app.py beside this file: sys.path[0], which the workers inherit
        "workers": s["workers"],
        "lifespan": "off",
        "http": "h11",  # the same HTTP parser in the official image and the test bed
        "loop": "asyncio",
        "timeout_keep_alive": KEEPALIVE_S,
        "timeout_graceful_shutdown": SHUTDOWN_S,
        "access_log": False,  # it would cost every request its own write
    }
    # Older uvicorn (Debian's 0.17, the test bed's) has no graceful timeout.
    accepted = inspect.signature(uvicorn.Config).parameters
    config = uvicorn.Config(**{k: v for k, v in options.items() if k in accepted})
    tcp = bind_tcp(s["host"], s["port"], config.backlog)
    unix, inode = bind_unix(s["socket"], s["mode"], s["gid"], config.backlog)
    print(f"uvicorn stack: listening on {s['host']}:{s['port']} and {s['socket']} "
          f"(mode {s['mode']:o}), {s['workers']} workers", file=sys.stderr)
    # uvicorn's supervisor for --workers: SIGTERM (or SIGINT) reaches it, it
    # passes SIGTERM to each worker, which stops accepting, lets requests in
    # flight finish, and exits; then it returns. Its signature changed in
    # uvicorn 0.30 (the workers' target became its own).
    if "target" in inspect.signature(Multiprocess).parameters:
        supervisor = Multiprocess(config, target=uvicorn.Server(config).run, sockets=[tcp, unix])
    else:
        supervisor = Multiprocess(config, sockets=[tcp, unix])
    try:
        supervisor.run()
    finally:
        # The socket this process made goes with it (uvicorn removes its --uds too).
        try:
            if os.stat(s["socket"]).st_ino == inode:
                os.unlink(s["socket"])
        except FileNotFoundError:
            pass


if __name__ == "__main__":  # the workers, spawned, import this file too
    main()
