"""granian for uds-lab: app.py (ASGI) on TCP (APP_TCP_ADDR) and on the Unix
socket (APP_UNIX_SOCKET) at once.

One granian server binds one listener (--host/--port, or --uds), so this runs
two, alike but for the listener, each with GRANIAN_WORKERS worker processes:

    python3 -m granian <ARGS> --host HOST --port PORT app:app
    python3 -m granian <ARGS> --uds APP_UNIX_SOCKET --uds-permissions MODE app:app

It checks the lab's settings first (a bad one stops the start, naming it,
before anything listens), removes a socket file a crash left (granian's --uds
panics on one: "address in use"), makes the socket with the lab's mode and
group, passes SIGTERM to both servers (each lets its requests in flight
finish), and exits when both have: 0 when both stopped cleanly. If one server
dies, it stops the other and exits 1, so the container restarts whole.
"""

import os
import signal
import socket
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# SIGTERM drains requests in flight for this long (compose gives 20 s).
SHUTDOWN_S = 15
# granian's HTTP/1 idle timeout is its header read timeout (30 s by default):
# a kept connection idle that long is closed, before nginx's upstream
# keepalive_timeout (60 s) would close it, so nginx could send on a connection
# granian has just closed (a 502 for a POST). 60 s is the most granian takes
# (1..60000 ms): as long as nginx's, not longer (README.md).
IDLE_MS = 60_000
BACKLOG = 1024


def setting(name, default):
    return os.environ.get(name) or default


def fail(msg):
    print(f"granian stack: {msg}", file=sys.stderr)
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
    workers = setting("GRANIAN_WORKERS", "2")
    if not workers.isdigit() or int(workers) < 1:
        fail(f'GRANIAN_WORKERS="{workers}": must be a whole number >= 1')
    return {
        "host": host.strip("[]") or "0.0.0.0",
        "port": int(port),
        "socket": setting("APP_UNIX_SOCKET", "/sock/app.sock"),
        "mode": mode,
        "gid": None if gid is None else int(gid),
        "workers": int(workers),
    }


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


def granian(s, listener):
    """One granian server's command line: the same for both but the listener.
    GRANIAN_* variables of the environment reach both (granian reads them);
    these arguments win over them."""
    return [
        sys.executable, "-m", "granian",
        "--interface", "asginl",  # ASGI without lifespan events (app.py has none)
        "--loop", "asyncio",  # the same loop in the official image and the test bed
        "--http", "1",  # nginx speaks HTTP/1.1 upstream
        "--no-ws",
        "--workers", str(s["workers"]),
        "--backlog", str(BACKLOG),
        "--http1-header-read-timeout", str(IDLE_MS),
        "--workers-kill-timeout", str(SHUTDOWN_S),
        "--working-dir", HERE,
        *listener,
        "app:app",
    ]


def start_servers(s):
    """granian on the TCP port and on the socket, each a process of its own."""
    tcp = subprocess.Popen(granian(s, ["--host", s["host"], "--port", str(s["port"])]))
    # The socket is born with the mode: granian's bind() applies the umask,
    # which the server inherits; --uds-permissions sets it again (granian
    # reads it as octal only with a leading 0: "660" would be decimal 660,
    # mode 1224).
    old = os.umask(0o777 & ~s["mode"])
    try:
        unix = subprocess.Popen(granian(s, ["--uds", s["socket"], "--uds-permissions", f"0{s['mode']:o}"]))
    finally:
        os.umask(old)
    return {"tcp": tcp, "unix": unix}


def await_socket(s, unix, stopping):
    """The socket's inode once granian has made it (None if it never did),
    given its group: the process's (in compose APP_GID, nginx workers'), or
    APP_SOCKET_GID."""
    inode = None
    while inode is None and not stopping and unix.poll() is None:
        try:
            inode = os.stat(s["socket"]).st_ino
        except FileNotFoundError:
            time.sleep(0.02)
    if inode is not None and s["gid"] is not None:
        os.chown(s["socket"], -1, s["gid"])
    if inode is not None:
        print(f"granian stack: listening on {s['host']}:{s['port']} and {s['socket']} (mode {s['mode']:o}), "
              f"{s['workers']} workers each", file=sys.stderr)
    return inode


def wait_all(servers):
    """Each server's exit code, a server still running SHUTDOWN_S + 3 s after
    the stop killed."""
    deadline = time.monotonic() + SHUTDOWN_S + 3
    codes = {}
    for name, p in servers.items():
        try:
            codes[name] = p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"granian stack: the {name} server still running {SHUTDOWN_S + 3} s after the stop: killed",
                  file=sys.stderr)
            p.kill()
            codes[name] = p.wait()
    return codes


def remove_own_socket(path, inode):
    """granian removes its --uds at stop; a server killed would leave it:
    removed here if it is still the one this run made."""
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass


def main():
    s = read_settings()
    remove_stale(s["socket"])
    servers = start_servers(s)
    stopping = []

    def stop(signum, _frame):
        if not stopping:
            stopping.append(signal.Signals(signum).name)
            print(f"granian stack: {stopping[0]}: both servers drain their requests in flight", file=sys.stderr)
            for p in servers.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    inode = await_socket(s, servers["unix"], stopping)
    # Until a stop, or until one server dies: then the other is stopped too.
    while not stopping and all(p.poll() is None for p in servers.values()):
        time.sleep(0.1)
    crashed = not stopping
    if crashed:
        dead = [n for n, p in servers.items() if p.poll() is not None]
        print(f"granian stack: the {dead[0]} server exited ({servers[dead[0]].returncode}): stopping", file=sys.stderr)
        stop(signal.SIGTERM, None)
    codes = wait_all(servers)
    remove_own_socket(s["socket"], inode)
    sys.exit(0 if not crashed and all(c == 0 for c in codes.values()) else 1)


if __name__ == "__main__":
    main()
