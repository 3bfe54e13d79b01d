"""The figures a report has, how modes pick their headline, and Prometheus's
answers as plain numbers (pure)."""
import math

# Every figure of a phase: key -> (label, unit, decimals). Order = report.json order.
METRICS = {
    "requests": ("requests", "", 0),
    "rps": ("requests/s", "req/s", 1),
    "client_p50_ms": ("client p50", "ms", 3),
    "client_p95_ms": ("client p95", "ms", 3),
    "client_p99_ms": ("client p99", "ms", 3),
    "failed_rate": ("failed rate (load generator)", "", 4),
    "dropped_iterations": ("dropped requests", "", 0),
    # openloop's: the share of requests sent over 1 ms behind their due time.
    "late_rate": ("sent late (load generator)", "", 4),
    "app_p50_ms": ("app p50", "ms", 3),
    "app_p99_ms": ("app p99", "ms", 3),
    "app_requests": ("app requests", "", 0),
    "app_cpu_us_per_req": ("app CPU/req", "µs", 1),
    "app_ctx_switches_per_req": ("app ctx switches/req", "", 2),
    # New connections the app accepted per request: the proof that a pooled
    # (-ka) path pooled (near 0) or did not (near 1: the app closes them).
    "app_conns_per_req": ("app new connections/req", "", 2),
    "nginx_requests": ("nginx requests (access log)", "", 0),
    "nginx_cpu_us_per_req": ("nginx CPU/req", "µs", 1),
    "host_ctx_switches_per_req": ("host ctx switches/req above idle", "", 2),
    "nginx_connect_ms": ("nginx upstream connect", "ms", 3),
    "nginx_5xx": ("nginx 5xx", "", 0),
    "generator_cpu_cores": ("load generator CPU", "cores", 2),
    # The server cores' time (NGINX_CPUSET and APP_CPUSET) by mode, per request:
    # nginx, the app and the kernel's work for them, softirq (packets) included.
    "core_user_us_per_req": ("server cores user/req", "µs", 1),
    "core_system_us_per_req": ("server cores system/req", "µs", 1),
    "core_softirq_us_per_req": ("server cores softirq/req", "µs", 1),
    "core_irq_us_per_req": ("server cores irq/req", "µs", 1),
    # The app's network namespace's connection-tracking table at the phase's
    # end (entries outlive their connection: 120 s in TIME_WAIT), its fill,
    # and the connections it dropped in the phase.
    "conntrack_entries": ("conntrack entries (app's namespace)", "", 0),
    "conntrack_fill": ("conntrack table fill (app's namespace)", "", 3),
    "conntrack_drops": ("conntrack drops (app's namespace)", "", 0),
}
# The modes of the split, in node-exporter's names.
CORE_MODES = ("user", "system", "softirq", "irq")
# The ratios to tcp that decide what the run says: at a fixed rate, latency and
# cost per request; in max mode, requests/s first. Context switches: the app's
# own, which the path causes; the host's, even above idle, carry the
# background's swings and are shown, not judged.
HEADLINE = ["client_p50_ms", "client_p99_ms", "app_cpu_us_per_req", "app_ctx_switches_per_req",
            "nginx_cpu_us_per_req"]


def is_max(settings):
    return settings.get("mode") == "max"


def headline(settings):
    return (["rps"] if is_max(settings) else []) + HEADLINE


def generator(settings):
    return settings.get("generator") or "k6"


class ReportError(Exception):
    """A problem the user must fix (missing file, Prometheus down): exit 2."""


def number(v):
    """A finite float, or None (for None, NaN, ±Inf, and what does not parse)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def samples(data):
    """The API's data as a list of (labels, value or None)."""
    if not data:
        return []
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and result:
        return [({}, number(result[1]))]
    if kind == "vector":
        return [(s.get("metric", {}), number(s.get("value", [None, None])[1])) for s in result or []]
    return []


def matrix_samples(data):
    """A range-vector answer as a list of series, each a list of (t, value or None)."""
    if not data or data.get("resultType") != "matrix":
        return []
    return [[(float(t), number(v)) for t, v in s.get("values") or []] for s in data.get("result") or []]


def scalar(query, expr):
    """The first sample's value; None when there is no series (never 0)."""
    s = samples(query(expr))
    return s[0][1] if s else None


def labels(query, expr):
    """The first sample's labels, or {}."""
    s = samples(query(expr))
    return s[0][0] if s else {}


def div(a, b, scale=1.0):
    if a is None or b is None or b == 0:
        return None
    return scale * a / b


def mean(values):
    vs = [v for v in values if v is not None]
    return sum(vs) / len(vs) if vs else None
