"""The report's tests' synthetic inputs and fakes, shared by report/test_*.py
(not a test module: pytest collects nothing here): a load.json as the
generators write it on plan.py's plan (make_k6, max_k6), a fake query
function and the server-side figures it answers (fake_query, server_table,
host_switches, cadvisor_table), the report built from them (build), and a
fake Prometheus's parts with `python3 -m report` run against it (reply_json,
serving, run_script, free_port)."""
import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from report import context, idle, queries
from report.lab import CATALOGUE

ROOT = Path(__file__).resolve().parent.parent
# The one plan (loadgen/plan.py): the fake load.json has the phases a real run has.
sys.path.insert(0, str(ROOT / "loadgen"))
import plan as runplan  # noqa: E402

START_MS = 1_763_820_000_000


# ---------------------------------------------------------------- synthetic inputs


def make_k6(paths=("tcp", "uds", "tcp-ka", "uds-ka"), rounds=3, rate=100, duration=10, warmup=5,
            workloads=("ping",), client=None, idle=10, interleave=None, block=1, paired=False, split=False,
            **phase_extra):
    """A load.json as loadgen/load.js writes it, on plan.py's plan. client(path,
    round) -> dict overriding a phase's fields (path "mix": the interleaved
    stream, planned where interleave gives its seconds). paired: the rounds in
    plan.py's pairs, back to back, as make load runs them. split: a stream per
    connection handling, as make load runs them (else one of every path)."""
    client = client or (lambda path, r: {})
    settings = {"workloads": list(workloads), "paths": list(paths), "mode": "rate", "generator": "k6", "rate": rate,
                "connections": 64, "duration": duration, "rounds": rounds, "warmup": warmup, "idle": idle, "seed": 1,
                "cpu_iterations": 10000, "sleep_ms": 10, "endpoint": "/ping",
                **({"interleave": interleave, "block": block} if interleave else {}),
                **({"pairs": runplan.pair_units(paths, CATALOGUE)} if paired else {}),
                **({"pooled": [p for p in paths if CATALOGUE["paths"][p].get("pooled")]} if split else {})}
    phases = runplan.plan(settings, runplan.routes(CATALOGUE["workloads"], settings))
    for ph in phases:
        ph.update({
            "requests": rate * ph["duration_s"],
            "failed_rate": 0,
            "dropped_iterations": 0,
            "duration_ms": {"avg": 1.0, "p50": 1.0, "p90": 1.5, "p95": 2.0, "p99": 3.0, "max": 9.0},
        })
        ph.update(phase_extra)
        over = client(ph["path"], ph["round"])
        if "duration_ms" in over:
            ph["duration_ms"] = {**ph["duration_ms"], **over.pop("duration_ms")}
        ph.update(over)
    return {
        "testid": "t1",
        "urls": {p: runplan.urls(CATALOGUE)[p] for p in paths},
        "start_ms": START_MS,
        "gap_s": runplan.GAP_SECONDS,
        "idle": runplan.idle_window(settings),
        "settings": settings,
        "phases": phases,
        "totals": {"requests": sum(p["requests"] for p in phases), "failed_rate": 0},
        "thresholds_failed": [],
    }


COMPOSE = {
    "services": {
        "app": {"image": "uds-lab/app:local", "cpus": 1, "cpuset": "", "mem_limit": "268435456"},
        "nginx": {"image": "nginx:1.30.4", "cpus": 1, "cpuset": "0", "mem_limit": "134217728",
                  "environment": {"NGINX_WORKER_PROCESSES": "1"}},
        "k6": {"image": "grafana/k6:1.8.1", "cpus": 2, "mem_limit": "536870912"},
        "prometheus": {"image": "prom/prometheus:v3.5.1"},
    }
}


def vector(value, labels=None):
    if value is None:
        return {"resultType": "vector", "result": []}
    return {"resultType": "vector", "result": [{"metric": labels or {}, "value": [0, str(value)]}]}


MACHINE = {
    "node_uname_info": [({"sysname": "Linux", "release": "6.8.0", "machine": "x86_64", "nodename": "lab"}, 1)],
    "prometheus_build_info": [({"version": "3.5.1"}, 1)],
    "count(node_cpu_seconds_total": 8,
    "node_memory_MemTotal_bytes": 16 * 2**30,
}


def fake_query(table):
    """A query function from {substring or tuple of substrings: value}; the first
    key whose substrings all occur in the expression wins. A value is a number,
    None (no series), [(labels, value)], or a callable(expr) giving one of those."""
    calls = []

    def query(expr):
        calls.append(expr)
        for key, value in table.items():
            keys = key if isinstance(key, tuple) else (key,)
            if all(k in expr for k in keys):
                if callable(value):
                    value = value(expr)
                if isinstance(value, dict):  # an API answer as it is (a matrix)
                    return value
                if isinstance(value, list):
                    return {"resultType": "vector",
                            "result": [{"metric": l, "value": [0, str(v)]} for l, v in value]}
                return vector(value)
        return vector(None)

    query.calls = calls
    return query


def window_ends(k6):
    """phase name -> the `@` timestamp string its queries use."""
    return {p["name"]: f"{queries.phase_window(k6, p)[1]:.3f}" for p in queries.measured_phases(k6)}


def by_phase(k6, fn):
    """A fake value that depends on the phase: fn(path, round) -> value, read from the query's `@ T`."""
    ends = {v: k for k, v in window_ends(k6).items()}
    phases = {p["name"]: p for p in k6["phases"]}

    def value(expr):
        m = re.search(r"@ ([0-9.]+)", expr)
        ph = phases[ends[m.group(1)]]
        return fn(ph["path"], ph["round"])

    return value


def matrix(*series):
    """A range-vector answer: each series a list of (t, value)."""
    return {"resultType": "matrix",
            "result": [{"metric": {}, "values": [[t, str(v)] for t, v in s]} for s in series]}


IDLE_RAW = "node_context_switches_total["  # the idle baseline's raw samples (a range query)


def idle_samples(k6, rate, at=(2.5, 7.5)):
    """node-exporter's samples of the host's switches in the run's idle phase:
    `rate` per second, taken `at` seconds into it (every 5 s, as scraped)."""
    start, _ = idle.idle_window(k6)
    return matrix([(start + dt, 1e9 + rate * dt) for dt in at])


def host_switches(k6, phase_value, idle_rate=100, at=(2.5, 7.5)):
    """The host's switches: the idle phase's samples at idle_rate, and each
    phase's increase from phase_value (a number, or by_phase's callable)."""
    def value(expr):
        if expr.startswith(IDLE_RAW):
            return idle_samples(k6, idle_rate, at)
        return phase_value(expr) if callable(phase_value) else phase_value
    return value


def server_table(k6, over=None, **kw):
    """Plausible server-side figures for every phase; `over` and keywords replace entries.
    The host idles at 100 switches/s: a 10 s phase's 4000 are 3000 above idle."""
    t = dict(MACHINE)
    t.update({
        "histogram_quantile(0.5,": 0.0004,
        "histogram_quantile(0.99,": 0.002,
        "app_http_requests_total": 1000,
        "process_cpu_seconds_total": 0.05,  # 50 µs per request
        ("container_cpu_usage_seconds_total", 'service="nginx"'): 0.08,  # 80 µs per request
        ("container_cpu_usage_seconds_total", 'service="k6"'): 0.5,
        "nginx_http_requests_total": 1000,
        "app_process_context_switches_total": 2500,  # 2.5 per request
        "node_context_switches_total": host_switches(k6, 4000),
        "upstream_connect_seconds_sum": 0.001,
        "upstream_connect_seconds_count": 1000,
        "nginx_location_requests_total": None,
    })
    t.update(over or {})
    t.update(kw)
    return t


def build(k6, table=None, compose=COMPOSE):
    return context.build_report(k6, compose, fake_query(table if table is not None else server_table(k6)), "http://prom:9090")


def kinds(rep):
    return [w["kind"] for w in rep["warnings"]]


def max_k6(rps, **kw):
    """A max-mode run: rps(path) -> requests/s the generator reached on that path."""
    k6 = make_k6(client=lambda p, r: {"requests": rps(p) * 10}, **kw)
    k6["settings"].update({"mode": "max", "connections": 64})
    return k6


def cadvisor_table(k6, raw, up=1, **over):
    """server_table where cAdvisor's counters are sparse: increase() over a
    phase finds too few samples (no result, as Prometheus answers), and the
    raw samples around the window come from raw(start, end) -> matrix."""
    windows = {f"{queries.phase_window(k6, p)[1]:.3f}": queries.phase_window(k6, p) for p in queries.measured_phases(k6)}

    def cadvisor(expr):
        if "increase(" in expr or "rate(" in expr:
            return None  # fewer than two samples inside the window
        t = float(re.search(r"@ ([0-9.]+)", expr).group(1))
        reach = float(re.search(r"\[([0-9]+)s\]", expr).group(1))
        start, end = next(w for w in windows.values() if abs(w[1] + queries.SPARSE_REACH_S - t) < 1e-3)
        assert reach >= end - start + 2 * queries.SPARSE_REACH_S
        return raw(start, end)

    table = {'up{job="cadvisor"}': up, "container_cpu_usage_seconds_total": cadvisor}
    # nginx's access log: every phase's requests, no 5xx.
    access_log = lambda expr: None if "5.." in expr else 1000  # noqa: E731
    table.update(server_table(k6, {"nginx_location_requests_total": access_log, **(over or {})}))
    del table[("container_cpu_usage_seconds_total", 'service="nginx"')]
    del table[("container_cpu_usage_seconds_total", 'service="k6"')]
    return table


CLUSTER = {"node": "n1", "kubelet": "v1.37.2", "kernel": "6.1.0", "os": "Debian GNU/Linux 12 (bookworm)",
           "runtime": "containerd://2.4.2", "cores": "2", "network_plugin": None, "lo_conntrack_entries": 0,
           "images": {"app": "uds-lab/app:local", "nginx": "nginx:1.30.4", "k6": "grafana/k6:1.8.1"},
           "placement": {"app": ["n1"], "nginx": ["n1"], "openloop": ["n1"], "prometheus": ["n1"]}}


# ---------------------------------------------------------------- a fake Prometheus and the command line


def reply_json(handler, data):
    """A Prometheus API answer (status success, data) from a handler in the test."""
    body = json.dumps({"status": "success", "data": data}).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextlib.contextmanager
def serving(handler):
    """handler's class served on 127.0.0.1 in a thread while the block runs: its base URL."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def run_script(*args):
    return subprocess.run([sys.executable, "-m", "report", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
