"""gunicorn's settings for uds-lab, from the lab's APP_* settings.

One gunicorn process, two binds: TCP (APP_TCP_ADDR) and the Unix socket
(APP_UNIX_SOCKET). A bad value stops gunicorn with a message naming it.
"""

import os
import sys


def setting(name, default):
    return os.environ.get(name) or default


def fail(msg):
    print(f"gunicorn stack: {msg}", file=sys.stderr)
    sys.exit(2)


_tcp = setting("APP_TCP_ADDR", ":8080")
_host, _, _port = _tcp.rpartition(":")
if not _port.isdigit() or not 0 < int(_port) < 65536:
    fail(f'APP_TCP_ADDR="{_tcp}": must be host:port or :port')
_socket = setting("APP_UNIX_SOCKET", "/sock/app.sock")
bind = [f"{_host or '0.0.0.0'}:{_port}", f"unix:{_socket}"]

# The socket file's mode is its access control. gunicorn sets the umask around
# bind() of a Unix socket (sock.py), so the socket is born with this mode;
# its group is the process's (in compose APP_GID, nginx workers' group).
# The lab's one rule for it (contract/socket-modes.json): read and write for
# the owner (the app) and the group (nginx's), nothing for others.
_mode = setting("APP_SOCKET_MODE", "0660")
_digits = _mode.removeprefix("0o")
if not _digits or _digits.strip("01234567"):
    fail(f'APP_SOCKET_MODE="{_mode}": must be an octal permission such as 0660')
_bits = int(_digits, 8)
if _bits > 0o777:
    fail(f'APP_SOCKET_MODE="{_mode}": must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)')
if _bits & 0o007:
    fail(f'APP_SOCKET_MODE="{_mode}": must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID')
if _bits & 0o060 != 0o060:
    fail(f'APP_SOCKET_MODE="{_mode}": must give the group read and write (nginx\'s group connects through it)')
if _bits & 0o600 != 0o600:
    fail(f'APP_SOCKET_MODE="{_mode}": must give the owner read and write (connecting needs write permission)')
umask = 0o777 & ~_bits
# gunicorn chowns the socket to its group setting (the process's by default);
# as a non-root user it may only name a group it belongs to.
_gid = os.environ.get("APP_SOCKET_GID")
if _gid:
    if not _gid.isdigit():
        fail(f'APP_SOCKET_GID="{_gid}": must be a numeric group id')
    group = int(_gid)

# Sync workers (gunicorn's default) answer one request per connection and
# close it ("Connection: close"), so nginx's pooled paths open a connection
# per request too; GUNICORN_WORKER_CLASS=gthread keeps connections open.
worker_class = setting("GUNICORN_WORKER_CLASS", "sync")
workers = int(setting("GUNICORN_WORKERS", "4"))
threads = int(setting("GUNICORN_THREADS", "1"))
# Idle connections outlive nginx's (keepalive_timeout 60s) so nginx never
# sends on one gunicorn has just closed (gthread and async workers).
keepalive = 120
# The longest request (/sleep/10000) fits; SIGTERM drains within this.
timeout = 30
graceful_timeout = 15
# Workers share the payload built at import.
preload_app = True
# app.py beside this file.
chdir = os.path.dirname(os.path.abspath(__file__))
wsgi_app = "app:application"
# No control socket (gunicorn 25.1+, for gunicornc): it would go to
# $HOME/.gunicorn, unwritable under a read-only root. Older versions ignore
# the setting.
control_socket_disable = True
# No access log: it would cost every request its own write.
accesslog = None
errorlog = "-"
