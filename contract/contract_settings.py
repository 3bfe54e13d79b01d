"""make contract's settings, checked before anything starts: APP_SOMAXCONN,
CONTRACT_IDLE_WAIT, and nginx's upstream keepalive_timeout read from the
lab's template (the pooled rows judge the app's idle timeout against it); a
bad one is a SettingError naming it."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# nginx's config, the one place its upstream keepalive_timeout is set: the
# idle row judges the app's timeout against it.
NGINX_TEMPLATE = ROOT / "nginx" / "templates" / "nginx.conf.template"
NGINX_TIME_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": 31536000}
NGINX_DEFAULT_KEEPALIVE_TIMEOUT = "60s"  # nginx's own, where an upstream block sets none
# CONTRACT_IDLE_WAIT: a Go duration (the checker's syntax), checked before
# anything starts; the checker (durationSetting) holds it to the same bound.
GO_DURATION = re.compile(r"(?:(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+")
GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
IDLE_WAIT_MAX = 600  # seconds


class SettingError(Exception):
    pass


def somaxconn_setting(environ, dotenv=None):
    """APP_SOMAXCONN from the environment, else .env: '' (the namespace's
    own) or a whole number from 1 to 65535."""
    v = environ.get("APP_SOMAXCONN")
    if v is None:
        v = (dotenv or read_dotenv)("APP_SOMAXCONN")
    v = (v or "").strip()
    if v and not (v.isdigit() and 1 <= int(v) <= 65535):
        raise SettingError(f'APP_SOMAXCONN="{v}": must be a whole number from 1 to 65535 (net.core.somaxconn '
                           "in the app's network namespace), or empty for the namespace's own")
    return v


def idle_wait_setting(environ):
    """CONTRACT_IDLE_WAIT ('' for the checker's default, 10 s): how long the
    idle row waits for the app to close a kept connection."""
    v = (environ.get("CONTRACT_IDLE_WAIT") or "").strip()
    if not v:
        return ""
    secs = sum(float(n) * GO_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", v)) \
        if GO_DURATION.fullmatch(v) else 0
    if not 0 < secs <= IDLE_WAIT_MAX:
        raise SettingError(f'CONTRACT_IDLE_WAIT="{v}": must be a duration such as 65s, above 0 and at most '
                           f"{IDLE_WAIT_MAX // 60}m (how long the keep-alive row waits for the app to close an idle connection)")
    return v


def nginx_time(value):
    """An nginx time ("60s", "1m30s", "75" in seconds, "500ms") in seconds."""
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|M|y)?", value)
    if not value or "".join(n + u for n, u in parts) != value:
        raise ValueError(value)
    return sum(int(n) * NGINX_TIME_UNITS[u or "s"] for n, u in parts)


def nginx_keepalive_timeout(text, source=NGINX_TEMPLATE):
    """The upstream keepalive_timeout of the pooled upstream {} blocks of an
    nginx config, in seconds (nginx's default where a block sets none); None
    if no block pools. The blocks must agree: the row compares the app with
    one figure."""
    text = re.sub(r"#[^\n]*", "", text)
    found = {}
    # A block's body ends at its "}", not at that of a template's ${VARIABLE}.
    for name, body in re.findall(r"\bupstream\s+(\S+)\s*\{((?:\$\{[^}]*\}|[^}])*)\}", text):
        if not re.search(r"(^|[;\s])keepalive\s+\S+\s*;", body):
            continue
        values = re.findall(r"(?:^|[;\s])keepalive_timeout\s+([^;\s]+)\s*;", body)
        raw = values[-1] if values else NGINX_DEFAULT_KEEPALIVE_TIMEOUT
        try:
            found[name] = nginx_time(raw)
        except ValueError:
            raise SettingError(f"{source}: upstream {name}: keepalive_timeout {raw}: not an nginx time such as 60s")
    if len(set(found.values())) > 1:
        raise SettingError(f"{source}: the pooled upstreams' keepalive_timeout differ ("
                           + ", ".join(f"{n} {v:g} s" for n, v in found.items()) + "): make contract compares the app with one")
    return next(iter(found.values()), None)


def read_dotenv(name):
    r = subprocess.run([str(ROOT / "scripts" / "dotenv.sh"), name], text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    return r.stdout.strip() if r.returncode == 0 else ""


def pooled_settings(environ, template=NGINX_TEMPLATE):
    """The checker's settings for the pooled rows: nginx's upstream
    keepalive_timeout from the lab's template, and CONTRACT_IDLE_WAIT."""
    out = {}
    timeout = nginx_keepalive_timeout(Path(template).read_text(), template)
    if timeout is not None:
        out["CONTRACT_NGINX_KEEPALIVE_TIMEOUT"] = f"{round(timeout * 1000)}ms"
    wait = idle_wait_setting(environ)
    if wait:
        out["CONTRACT_IDLE_WAIT"] = wait
    return out
