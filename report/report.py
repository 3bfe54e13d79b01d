#!/usr/bin/env python3
"""uds-lab report: one run's figures per path, from k6's own statistics and
from Prometheus, compared with tcp round by round.

    python report/report.py --run <testid> --prometheus http://127.0.0.1:9090 --results results

Reads results/<testid>/load.json (k6/load.js, handleSummary) and compose.json
(`docker compose config --format json`), queries Prometheus's HTTP API over
each measured phase's window, and writes results/<testid>/report.md,
report.json and <workload>-latency.png / <workload>-cost.png.

The code is split in three: the Prometheus client and file writing (I/O),
pure functions from phases to figures, aggregates, ratios and warnings, and
rendering (Markdown, charts). Only the I/O part touches the network or disk.
"""
import argparse
import json
import math
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

# The lab's paths (catalogue.json); their colours are the dashboards' too.
CATALOGUE = json.loads((Path(__file__).resolve().parent.parent / "catalogue.json").read_text())
PATH_COLOURS = {name: p["colour"] for name, p in CATALOGUE["paths"].items()}
BASELINE = "tcp"
# The app's requests that are load, not the lab's own scrapes and healthchecks.
APP_LOAD = 'job="app",route!~"/metrics|/healthz|/readyz"'
# A compose service's container in cAdvisor: the nginx that serves a path
# (nginx or nginx-lo), or the load generator (k6, or wrk for `make max GENERATOR=wrk`).
CADVISOR_SERVICE = 'container_label_com_docker_compose_service="{service}"'

# Warning thresholds (each stated in the report's "How to read this").
MIN_RATE_SHARE = 0.95  # achieved requests/s below this share of RATE: k6 did not hold the rate
# Dropped iterations above this share of a phase's iterations (requests + dropped):
# the generator could not start requests on time. A few in thousands are
# scheduling hiccups, shown in the table, not a saturated generator.
MAX_DROPPED_SHARE = 0.01
MAX_K6_CPU_SHARE = 0.90  # k6 at or above this share of its CPU limit: k6 was busy
MAX_RELATIVE_SPREAD = 0.20  # (max - min) / mean of the per-round ratios
MIN_PHASE_S = 10  # two scrape intervals (prometheus.yml: 5 s): shorter phases get no server-side figures
SAME_CEILING = 1.05  # max mode: every path within 5% of the others: one ceiling, likely the generator's
# A counter sampled less often than the phase is long (cAdvisor: every 5-10 s,
# its samples carry their own timestamps) can have fewer than two samples inside
# a phase's window, where increase() gives nothing: the report then reads the
# samples up to this far around it. The others are scraped every 5 s.
SPARSE_REACH_S = 15
SPARSE_SOURCES = ("cadvisor",)
# Which Prometheus job each server figure comes from, and its name, for the
# reason a figure is missing.
COLLECTORS = {"app": "the app", "nginx": "nginx-exporter", "nginx-log": "nginx-log-exporter",
              "node": "node-exporter", "cadvisor": "cAdvisor"}
RAW_SOURCES = {
    "app_p50_s": "app", "app_p99_s": "app", "app_requests": "app", "app_cpu_s": "app",
    "nginx_cpu_s": "cadvisor", "k6_cpu_cores": "cadvisor", "nginx_requests": "nginx-log", "ctx_switches": "node",
    "connect_sum_s": "nginx-log", "connect_count": "nginx-log", "nginx_5xx": "nginx-log",
}
# Each server figure from its raw values (the last one divides, where two);
# the per-request costs divide by the generator's own count (PER_GENERATOR_REQUEST).
FIGURE_INPUTS = {
    "app_p50_ms": ["app_p50_s"], "app_p99_ms": ["app_p99_s"], "app_requests": ["app_requests"],
    "app_cpu_us_per_req": ["app_cpu_s", "app_requests"], "nginx_requests": ["nginx_requests"],
    "nginx_cpu_us_per_req": ["nginx_cpu_s"], "ctx_switches_per_req": ["ctx_switches"],
    "nginx_connect_ms": ["connect_sum_s", "connect_count"], "k6_cpu_cores": ["k6_cpu_cores"],
}
PER_GENERATOR_REQUEST = ("nginx_cpu_us_per_req", "ctx_switches_per_req")
# sum(increase(S[Ns] @ T)) and sum(rate(...)): a counter the report can also
# read from its raw samples.
COUNTER_EXPR = re.compile(r"^sum\((increase|rate)\((.+)\[[0-9]+s\] @ [0-9.]+\)\)$")

# Every figure of a phase: key -> (label, unit, decimals). Order = report.json order.
METRICS = {
    "requests": ("requests", "", 0),
    "rps": ("requests/s", "req/s", 1),
    "client_p50_ms": ("client p50", "ms", 3),
    "client_p95_ms": ("client p95", "ms", 3),
    "client_p99_ms": ("client p99", "ms", 3),
    "failed_rate": ("k6 failed rate", "", 4),
    "dropped_iterations": ("dropped iterations", "", 0),
    "app_p50_ms": ("app p50", "ms", 3),
    "app_p99_ms": ("app p99", "ms", 3),
    "app_requests": ("app requests", "", 0),
    "app_cpu_us_per_req": ("app CPU/req", "µs", 1),
    "nginx_requests": ("nginx requests (access log)", "", 0),
    "nginx_cpu_us_per_req": ("nginx CPU/req", "µs", 1),
    "ctx_switches_per_req": ("ctx switches/req", "", 2),
    "nginx_connect_ms": ("nginx upstream connect", "ms", 3),
    "nginx_5xx": ("nginx 5xx", "", 0),
    "k6_cpu_cores": ("k6 CPU", "cores", 2),
}
# The ratios to tcp that decide what the run says: at a fixed rate, latency and
# cost per request; in max mode, requests/s first.
HEADLINE = ["client_p50_ms", "client_p99_ms", "app_cpu_us_per_req", "nginx_cpu_us_per_req", "ctx_switches_per_req"]


def is_max(settings):
    return settings.get("mode") == "max"


def headline(settings):
    return (["rps"] if is_max(settings) else []) + HEADLINE


def generator(settings):
    return settings.get("generator") or "k6"
NO_CADVISOR = "n/a (cAdvisor not running)"


class ReportError(Exception):
    """A problem the user must fix (missing file, Prometheus down): exit 2."""


# ---------------------------------------------------------------- Prometheus I/O


def prometheus_client(base_url, timeout=15):
    """A query function: PromQL expression -> the API's `data` ({resultType, result})."""
    base = base_url.rstrip("/")

    def query(expr):
        url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as e:
            # Prometheus answers a bad query with 400/422 and a JSON error.
            try:
                detail = json.load(e).get("error", "")
            except (ValueError, OSError):
                detail = ""
            raise ReportError(f"Prometheus at {base} rejected a query (HTTP {e.code}: {detail}): {expr}") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise ReportError(f"Prometheus at {base} does not answer: {e}") from e
        if body.get("status") != "success":
            raise ReportError(f"Prometheus at {base} failed a query ({body.get('error', 'no error given')}): {expr}")
        return body.get("data", {})

    return query


# ---------------------------------------------------------------- pure: values


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


# ---------------------------------------------------------------- pure: per phase


def measured_phases(k6):
    """The phases that count: round >= 1 (warm-up phases are left out)."""
    return [p for p in k6.get("phases", []) if p.get("round", 0) >= 1 and p.get("phase", "measure") != "warmup"]


def phase_window(k6, phase):
    """(start, end) in epoch seconds, or None when k6 did not record its start time."""
    start_ms = k6.get("start_ms")
    if start_ms is None:
        return None
    start = start_ms / 1000.0 + phase["start_offset_s"]
    return start, start + phase["duration_s"]


def nginx_of(path):
    """The compose service of the nginx that serves a path (catalogue.json)."""
    return (CATALOGUE["paths"].get(path) or {}).get("nginx", "nginx")


def server_queries(path, duration_s, end_s, gen="k6"):
    """PromQL for one phase: instant queries at the window's end over its length."""
    r = f"[{int(round(duration_s))}s] @ {end_s:.3f}"
    inc = lambda metric, sel="": f"sum(increase({metric}{'{' + sel + '}' if sel else ''}{r}))"  # noqa: E731
    # The app's native histogram (what Prometheus keeps of ours), or classic
    # buckets (what a swapped-in app may expose).
    q = lambda qq: (  # noqa: E731
        f"histogram_quantile({qq}, sum(increase(app_http_request_duration_seconds{{{APP_LOAD}}}{r})))"
        f" or histogram_quantile({qq}, sum by (le) (increase(app_http_request_duration_seconds_bucket{{{APP_LOAD}}}{r})))"
    )
    return {
        "app_p50_s": q(0.5),
        "app_p99_s": q(0.99),
        "app_requests": inc("app_http_requests_total", APP_LOAD),
        "app_cpu_s": inc("process_cpu_seconds_total", 'job="app"'),
        "nginx_cpu_s": inc("container_cpu_usage_seconds_total", CADVISOR_SERVICE.format(service=nginx_of(path))),
        "nginx_requests": inc("nginx_location_requests_total", f'path="{path}"'),
        "ctx_switches": inc("node_context_switches_total"),
        "connect_sum_s": inc("nginx_location_upstream_connect_seconds_sum", f'path="{path}"'),
        "connect_count": inc("nginx_location_upstream_connect_seconds_count", f'path="{path}"'),
        "nginx_5xx": inc("nginx_location_requests_total", f'path="{path}",status=~"5.."'),
        "k6_cpu_cores": f"sum(rate(container_cpu_usage_seconds_total{{{CADVISOR_SERVICE.format(service=gen)}}}{r}))",
    }


def client_figures(phase):
    """k6's own statistics for one phase (exact)."""
    d = phase.get("duration_ms") or {}
    requests = phase.get("requests") or 0
    return {
        "requests": requests,
        "rps": div(requests, phase.get("duration_s")),
        "client_p50_ms": number(d.get("p50")),
        "client_p95_ms": number(d.get("p95")),
        "client_p99_ms": number(d.get("p99")),
        "failed_rate": number(phase.get("failed_rate")) or 0.0,
        "dropped_iterations": phase.get("dropped_iterations") or 0,
    }


def sparse_increase(series, start, end):
    """A counter's increase over [start, end] from its samples around the
    window, for when fewer than two lie inside it (increase() has nothing).
    Per series: the rate between the last sample at or before the start (else
    the first inside) and the first at or after the end (else the last inside),
    resets counted as increase() counts them, times the window's length.
    Returns (increase, None), or (None, reason)."""
    total, used = 0.0, 0
    for samples in series:
        pts = sorted((t, v) for t, v in samples if v is not None)
        inside = [p for p in pts if start < p[0] < end]
        before = [p for p in pts if p[0] <= start]
        after = [p for p in pts if p[0] >= end]
        a = before[-1] if before else (inside[0] if inside else None)
        b = after[0] if after else (inside[-1] if inside else None)
        if a is None or b is None or b[0] <= a[0]:
            continue
        seg = [p for p in pts if a[0] <= p[0] <= b[0]]
        delta = sum(v2 - v1 if v2 >= v1 else v2 for (_, v1), (_, v2) in zip(seg, seg[1:]))
        total += delta / (b[0] - a[0]) * (end - start)
        used += 1
    if used:
        return total, None
    return None, ("too few samples" if any(series) else "no series")


def sparse_estimate(query, expr, window):
    """A counter figure that increase() or rate() could not give, from the raw
    samples around the window: (value, None) or (None, "no series" | "too few samples")."""
    m = COUNTER_EXPR.match(expr)
    if m is None:
        return None, "no value"
    fn, selector = m.groups()
    start, end = window
    reach = int(math.ceil(end - start + 2 * SPARSE_REACH_S))
    series = matrix_samples(query(f"{selector}[{reach}s] @ {end + SPARSE_REACH_S:.3f}"))
    inc, reason = sparse_increase(series, start, end)
    if inc is None:
        return None, reason
    return (inc / (end - start) if fn == "rate" else inc), None


def missing_reason(query, raw_key, problem, window, cache):
    """Why a raw value is missing, in words, from its collector's `up` over the window."""
    job = RAW_SOURCES.get(raw_key)
    name = COLLECTORS.get(job, job)
    if job is None:
        return problem
    if job not in cache:
        start, end = window
        cache[job] = scalar(query, f'max(max_over_time(up{{job="{job}"}}[{int(math.ceil(end - start))}s] @ {end:.3f}))')
    if not cache[job]:
        hint = " (make up leaves it out where it cannot run: see make doctor)" if job in ("cadvisor", "node") else ""
        return f"{name} not running{hint}"
    if problem == "too few samples":
        return f"too few {name} samples around the window"
    if job == "cadvisor" and problem == "no series":
        return "cAdvisor runs but labels no container (google/cadvisor#3772: see make doctor)"
    return f"no series from {name}" if problem == "no series" else f"{name}: {problem}"


def server_values(query, phase, window, gen="k6"):
    """The raw values of one phase, the ones read from samples around the window
    (sparse counters), and why the others are missing."""
    if window is None:
        return {}, [], {k: "load.json has no start time" for k in RAW_SOURCES}
    exprs = server_queries(phase["path"], phase["duration_s"], window[1], gen)
    raw, estimated, why, cache = {}, [], {}, {}
    for k, e in exprs.items():
        raw[k] = scalar(query, e)
        # No 5xx series means none was logged: nothing missing.
        if raw[k] is not None or k == "nginx_5xx":
            continue
        problem = "no value in the window"
        if RAW_SOURCES.get(k) in SPARSE_SOURCES:
            raw[k], problem = sparse_estimate(query, e, window)
            if raw[k] is not None:
                estimated.append(k)
                continue
        why[k] = missing_reason(query, k, problem, window, cache)
    return raw, estimated, why


def server_figures(query, phase, window, gen="k6"):
    """Prometheus's figures for one phase; every one None when there is no window or series.
    Costs are per request the load generator completed in the phase (its exact
    count): the same denominator for every path and either nginx."""
    return server_figures_explained(query, phase, window, gen)[0]


def server_figures_explained(query, phase, window, gen="k6"):
    """(figures, estimated, missing): the figures, those read from samples
    around the window, and why each missing one is missing."""
    raw, estimated_raw, why = server_values(query, phase, window, gen)
    figures = server_figures_from(raw, window, phase)
    estimated, missing = [], {}
    for fig, inputs in FIGURE_INPUTS.items():
        if any(k in estimated_raw for k in inputs) and figures.get(fig) is not None:
            estimated.append(fig)
        if figures.get(fig) is not None:
            continue
        gone = [why[k] for k in inputs if k in why]
        if gone:
            missing[fig] = gone[0]
        elif len(inputs) == 2 and not raw.get(inputs[1]):
            missing[fig] = f"no {METRICS.get(inputs[1], (inputs[1].replace('_', ' '),))[0]} in the window"
        elif fig in PER_GENERATOR_REQUEST and not phase.get("requests"):
            missing[fig] = "no requests in the window"
        else:
            missing[fig] = "no value (NaN)"
    return figures, estimated, missing


def server_figures_from(raw, window, phase):
    """The phase's server figures from its raw values."""
    get = raw.get
    requests = phase.get("requests") or None
    return {
        "app_p50_ms": div(get("app_p50_s"), 1, 1e3),
        "app_p99_ms": div(get("app_p99_s"), 1, 1e3),
        "app_requests": get("app_requests"),
        "app_cpu_us_per_req": div(get("app_cpu_s"), get("app_requests"), 1e6),
        "nginx_requests": get("nginx_requests"),
        "nginx_cpu_us_per_req": div(get("nginx_cpu_s"), requests, 1e6),
        "ctx_switches_per_req": div(get("ctx_switches"), requests),
        "nginx_connect_ms": div(get("connect_sum_s"), get("connect_count"), 1e3),
        # No 5xx series means none was logged; no window means unknown.
        "nginx_5xx": (get("nginx_5xx") or 0.0) if window is not None else None,
        "k6_cpu_cores": get("k6_cpu_cores"),
    }


def phase_figures(k6, query):
    """Every measured phase with its window and figures, in run order; `missing`
    says why a server figure is n/a, `estimated` which ones came from samples
    around the window."""
    out = []
    gen = generator(k6.get("settings") or {})
    for p in measured_phases(k6):
        window = phase_window(k6, p)
        server, estimated, missing = server_figures_explained(query, p, window, gen)
        out.append({
            "name": p["name"],
            "workload": p["workload"],
            "path": p["path"],
            "round": p["round"],
            "endpoint": p.get("endpoint"),
            "window": None if window is None else {"start_s": round(window[0], 3), "end_s": round(window[1], 3)},
            "generator": gen,
            "figures": {**client_figures(p), **server},
            "estimated": estimated,
            "missing": missing,
        })
    return out


# ---------------------------------------------------------------- pure: aggregates and ratios


def ratio_stats(path_by_round, tcp_by_round):
    """Per-round ratio path/tcp, then mean, min, max of those ratios (the spread)."""
    per_round = {}
    for r, v in sorted(path_by_round.items()):
        t = tcp_by_round.get(r)
        ratio = div(v, t)
        if ratio is not None:
            per_round[r] = ratio
    if not per_round:
        return None
    vs = list(per_round.values())
    return {
        "mean": sum(vs) / len(vs),
        "min": min(vs),
        "max": max(vs),
        "rounds": len(vs),
        "per_round": {str(r): v for r, v in per_round.items()},
    }


def judge(ratio):
    """What a ratio's spread allows one to say: clear | straddles | wide | single | none."""
    if ratio is None:
        return "none"
    if ratio["rounds"] < 2:
        return "single"
    if ratio["min"] <= 1.0 <= ratio["max"]:
        return "straddles"
    if (ratio["max"] - ratio["min"]) / ratio["mean"] > MAX_RELATIVE_SPREAD:
        return "wide"
    return "clear"


def verdict(path, ratio):
    """A plain sentence for a ratio to tcp."""
    status = judge(ratio)
    if status == "none":
        return "n/a"
    rng = f"{ratio['min']:.2f}-{ratio['max']:.2f}"
    if status == "single":
        return f"{path} {ratio['mean']:.2f}x tcp (1 round: spread cannot be judged)"
    if status == "straddles":
        return f"no clear difference from tcp ({rng})"
    if status == "wide":
        return f"spread too wide ({rng})"
    return f"{path} {ratio['mean']:.2f}x tcp ({rng})"


def aggregate(phases, settings):
    """Per workload and path: the rounds, the mean of each figure over rounds,
    and each figure's ratio to tcp computed per round (None for tcp itself or
    when tcp was not measured)."""
    workloads = {}
    order = settings.get("workloads") or sorted({p["workload"] for p in phases})
    path_order = settings.get("paths") or sorted({p["path"] for p in phases})
    for w in order:
        mine = [p for p in phases if p["workload"] == w]
        if not mine:
            continue
        by_path = {}
        for path in path_order:
            rounds = sorted((p for p in mine if p["path"] == path), key=lambda p: p["round"])
            if rounds:
                by_path[path] = rounds
        tcp = by_path.get(BASELINE)
        paths = {}
        for path, rounds in by_path.items():
            per_metric = {k: {p["round"]: p["figures"].get(k) for p in rounds} for k in METRICS}
            entry = {
                "phases": [p["name"] for p in rounds],
                "rounds": [p["round"] for p in rounds],
                "mean": {k: mean(v.values()) for k, v in per_metric.items()},
                "min": {k: min((x for x in v.values() if x is not None), default=None) for k, v in per_metric.items()},
                "max": {k: max((x for x in v.values() if x is not None), default=None) for k, v in per_metric.items()},
                # Why a figure is n/a in every round, where one reason covers them all.
                "missing": {k: why for k in METRICS if (why := common_reason(rounds, k))},
                "ratio_to_tcp": None,
                "verdict": None,
            }
            if tcp is not None and path != BASELINE:
                tcp_metric = {k: {p["round"]: p["figures"].get(k) for p in tcp} for k in METRICS}
                entry["ratio_to_tcp"] = {k: ratio_stats(per_metric[k], tcp_metric[k]) for k in METRICS}
                entry["verdict"] = verdict(path, entry["ratio_to_tcp"][headline(settings)[0]])
            paths[path] = entry
        workloads[w] = {"tcp_measured": tcp is not None, "paths": paths}
    return workloads


# ---------------------------------------------------------------- pure: where the time goes

# The cost breakdown (catalogue.json): each term is one path's figure minus
# another's, round by round (a path's round r against the other's round r, as
# the ratios).
TERMS = [(t["key"], t["label"], *t["paths"]) for t in CATALOGUE["breakdown"]["terms"]]
# The figures a term is given in, in microseconds: (key in METRICS, label, scale to µs).
TERM_FIGURES = [
    ("client_p50_ms", "client p50 latency", 1e3),
    ("app_cpu_us_per_req", "app CPU per request", 1.0),
    ("nginx_cpu_us_per_req", "nginx CPU per request", 1.0),
]


def diff_stats(a_by_round, b_by_round, scale=1.0):
    """Per-round difference a - b (times scale), then its mean, min and max, and
    the mean relative to b's mean; None when no round has both."""
    per_round = {r: scale * (a - b_by_round[r]) for r, a in sorted(a_by_round.items())
                 if a is not None and b_by_round.get(r) is not None}
    if not per_round:
        return None
    vs = list(per_round.values())
    a_mean = mean([scale * a_by_round[r] for r in per_round])
    b_mean = mean([scale * b_by_round[r] for r in per_round])
    m = sum(vs) / len(vs)
    return {"mean": m, "min": min(vs), "max": max(vs), "rounds": len(vs), "a_mean": a_mean, "b_mean": b_mean,
            "relative": div(m, b_mean), "per_round": {str(r): v for r, v in per_round.items()}}


def measurable(d):
    """Whether a difference's spread over rounds excludes zero (needs 2 rounds)."""
    return d is not None and d["rounds"] >= 2 and not (d["min"] <= 0 <= d["max"])


def by_round(phases, workload):
    """{path: {figure: {round: value}}} of one workload's measured phases."""
    out = {}
    for p in phases:
        if p["workload"] == workload:
            for k, v in p["figures"].items():
                out.setdefault(p["path"], {}).setdefault(k, {})[p["round"]] = v
    return out


def breakdown(phases, workload, figures=TERM_FIGURES):
    """Every term whose two paths were measured: its difference per figure."""
    rounds = by_round(phases, workload)
    out = {}
    for key, label, a, b in TERMS:
        if a in rounds and b in rounds:
            out[key] = {"label": label, "minuend": a, "subtrahend": b, "figures": {
                f: diff_stats(rounds[a].get(f, {}), rounds[b].get(f, {}), scale) for f, _, scale in figures}}
    return out


def fmt_diff(d, unit="µs", share=True):
    """A difference as the report words it: a number only when it is measurable;
    share adds it as a share of the second path's figure."""
    if d is None:
        return "n/a"
    rng = f"{d['min']:,.1f} to {d['max']:,.1f} {unit}"
    if d["rounds"] < 2:
        return f"{d['mean']:,.1f} {unit} (1 round: spread unknown)"
    if not measurable(d):
        return f"no measurable difference ({rng})"
    rel = f", {d['relative']:.0%}" if share and d.get("relative") else ""
    return f"{d['mean']:,.1f} {unit} ({rng}{rel})"


def answer(w, phases, settings):
    """The answer for one workload, in plain words: what the socket saved against
    TCP over loopback and across the bridge, with and without keepalive, and why."""
    if is_max(settings):
        return max_answer(w, phases, settings)
    rounds = by_round(phases, w)
    route = next((p.get("endpoint") for p in phases if p["workload"] == w), None) or w
    at = f"at {settings['rate']} req/s" if settings.get("rate") else "at a fixed rate"

    def p50_diff(a, b):
        if a not in rounds or b not in rounds:
            return None
        return diff_stats(rounds[a].get("client_p50_ms", {}), rounds[b].get("client_p50_ms", {}), 1e3)

    def phrase(d, against):
        if d is None:
            return None
        if not measurable(d):
            return f"made no measurable difference against {against} ({d['min']:,.0f} to {d['max']:,.0f} µs over the rounds)"
        verb = "saved" if d["mean"] > 0 else "cost"
        share = div(d["mean"], d["a_mean"])  # of TCP's median
        pct = f" ({abs(share):.0%})" if share is not None else ""
        return f"{verb} {abs(d['mean']):,.0f} µs{pct} of median latency against {against}"

    sentences = []
    for kind, uds, lo, bridge in (("with a new connection per request", "uds", "tcp-lo", "tcp"),
                                  ("with pooled keepalive connections", "uds-ka", "tcp-lo-ka", "tcp-ka")):
        parts = [x for x in (phrase(p50_diff(lo, uds), "TCP over loopback"),
                             phrase(p50_diff(bridge, uds), "TCP across the Docker bridge")) if x]
        if parts:
            sentences.append(f"{kind[0].upper()}{kind[1:]}, the socket " + "; it ".join(parts) + ".")
    if not sentences:
        return (f"**`{w}`**: this run did not measure the socket and TCP with the same connection handling "
                "(PATHS needs uds with tcp or tcp-lo, or uds-ka with tcp-ka or tcp-lo-ka): no answer to give.")
    terms = breakdown(phases, w)
    why = []
    for key, text in (("tcp_connect", "a new TCP connection across the bridge costs"),
                      ("tcp_lo_connect", "over loopback"),
                      ("uds_connect", "a new socket connection"),
                      ("bridge_pooled", "the bridge on a pooled connection"),
                      ("control_new", "the two nginx (control, socket)")):
        d = (terms.get(key) or {}).get("figures", {}).get("client_p50_ms")
        if d is not None:
            why.append(f"{text} {fmt_diff(d, share=False)}")
    out = f"**`{w}`** (`{route}`), {at}: " + " ".join(sentences)
    if why:
        out += " Where the time goes (client median): " + "; ".join(why) + "."
    return out


def max_answer(w, phases, settings):
    """In max mode the answer is throughput: each socket path's requests/s against TCP's."""
    rounds = by_round(phases, w)
    parts = []
    for uds, tcps in (("uds", ("tcp-lo", "tcp")), ("uds-ka", ("tcp-lo-ka", "tcp-ka"))):
        for t in tcps:
            if uds in rounds and t in rounds:
                r = ratio_stats(rounds[uds].get("rps", {}), rounds[t].get("rps", {}))
                if r is None:
                    continue
                if judge(r) == "straddles":
                    parts.append(f"{uds} against {t}: no measurable difference ({r['min']:.2f}-{r['max']:.2f}x)")
                else:
                    parts.append(f"{uds} carried {r['mean']:.2f}x the requests/s of {t} ({r['min']:.2f}-{r['max']:.2f})")
    if not parts:
        return f"**`{w}`**: this run did not measure both the socket and TCP: no answer to give."
    return (f"**`{w}`**, each path flat out ({generator(settings)}, {settings.get('connections')} connections): "
            + "; ".join(parts) + ".")


# ---------------------------------------------------------------- pure: warnings


def common_reason(phases, key):
    """The reason a figure is missing, if it is missing in every phase for the same one."""
    reasons = {(p.get("missing") or {}).get(key) for p in phases}
    return reasons.pop() if len(reasons) == 1 and None not in reasons else None


def figure_warnings(phases):
    """Figures read from samples around the window, and figures missing for a
    reason the user can act on (a collector left out, labelling nothing, or
    sampling too seldom); nothing counted in a window (no requests, no new
    upstream connection on a pooled path) is not a warning."""
    out = []
    estimated = {}
    for p in phases:
        for f in p.get("estimated") or []:
            estimated.setdefault(f, []).append(p["name"])
    if estimated:
        names = [p["name"] for p in phases if p.get("estimated")]
        what = "; ".join(f"{METRICS[f][0]} in {len(v)} of {len(phases)} phases" for f, v in estimated.items())
        out.append(warning("sparse_samples", f"{what}: fewer than two samples inside the phase's window (a collector "
                           "sampling less often than the phase is long), so read from the samples around it: an estimate",
                           names))
    groups = {}
    for p in phases:
        for f, why in (p.get("missing") or {}).items():
            if why.endswith(" in the window") or why == "load.json has no start time":
                continue
            groups.setdefault((f, why), []).append(p["name"])
    for (f, why), names in groups.items():
        out.append(warning("missing_figures", f"{METRICS[f][0]}: n/a in {len(names)} of {len(phases)} phases: {why}", names))
    return out


def warning(kind, message, phases, workload=None, path=None):
    return {"kind": kind, "workload": workload, "path": path, "phases": phases, "message": message}


def saturation_reasons(fig, rate, k6_cpus, gen="k6"):
    reasons = []
    dropped = fig.get("dropped_iterations") or 0
    planned = dropped + (fig.get("requests") or 0)
    if planned and dropped / planned > MAX_DROPPED_SHARE:
        reasons.append(f"{dropped:.0f} dropped iterations ({dropped / planned:.1%} > {MAX_DROPPED_SHARE:.0%})")
    if rate and fig.get("rps") is not None and fig["rps"] < MIN_RATE_SHARE * rate:
        reasons.append(f"{fig['rps']:.1f} req/s < {MIN_RATE_SHARE:.0%} of RATE {rate}")
    cores = fig.get("k6_cpu_cores")
    if k6_cpus and cores is not None and cores >= MAX_K6_CPU_SHARE * k6_cpus:
        reasons.append(f"{gen} used {cores:.2f} of its {k6_cpus:g} CPUs")
    return reasons


def error_reasons(fig):
    reasons = []
    if (fig.get("failed_rate") or 0) > 0:
        reasons.append(f"k6 failed {fig['failed_rate']:.2%}")
    if (fig.get("nginx_5xx") or 0) > 0:
        reasons.append(f"nginx 5xx {fig['nginx_5xx']:.0f}")
    return reasons


def phase_warnings(phases, rate, k6_cpus, gen="k6"):
    """Saturation and errors, one warning per workload and path listing its phases."""
    out = []
    groups = {}
    for p in phases:
        groups.setdefault((p["workload"], p["path"]), []).append(p)
    for (w, path), ps in groups.items():
        for kind, reasons_of, message in (
            ("saturated", lambda f: saturation_reasons(f, rate, k6_cpus, gen), f"{gen} was the limit: figures describe {gen}, not the path"),
            ("errors", error_reasons, "errors: this path's figures are not comparable"),
        ):
            hit = [(p["name"], reasons_of(p["figures"])) for p in ps]
            hit = [(n, r) for n, r in hit if r]
            if hit:
                detail = "; ".join(f"{n}: {', '.join(r)}" for n, r in hit)
                out.append(warning(kind, f"{message} ({detail})", [n for n, _ in hit], w, path))
    return out


def ratio_warnings(workloads, settings):
    """tcp missing, a single round, and headline ratios whose spread says nothing."""
    out = []
    single = (settings.get("rounds") or 0) == 1
    gen = generator(settings)
    for w, wl in workloads.items():
        all_phases = [n for e in wl["paths"].values() for n in e["phases"]]
        if not wl["tcp_measured"]:
            out.append(warning("tcp_missing", "tcp was not in PATHS: ratios to tcp cannot be computed", all_phases, w))
            continue
        if single:
            out.append(warning("single_round", "1 round per path: the spread of the ratios cannot be judged", all_phases, w))
            continue
        tcp_phases = wl["paths"][BASELINE]["phases"]
        rps = [e["mean"]["rps"] for e in wl["paths"].values() if e["mean"]["rps"]]
        if is_max(settings) and len(rps) > 1 and max(rps) / min(rps) < SAME_CEILING:
            out.append(warning(
                "same_ceiling",
                f"every path reached the same ceiling ({min(rps):.0f}-{max(rps):.0f} req/s): that is likely {gen}'s "
                f"limit, not the paths'; give {gen} more CPU or use GENERATOR=wrk",
                all_phases, w))
        for path, e in wl["paths"].items():
            if e["ratio_to_tcp"] is None:
                continue
            bad = []
            for k in headline(settings):
                r = e["ratio_to_tcp"][k]
                status = judge(r)
                label = METRICS[k][0]
                if status == "straddles":
                    bad.append(f"{label}: no clear difference from tcp ({r['min']:.2f}-{r['max']:.2f} includes 1.0)")
                elif status == "wide":
                    bad.append(f"{label}: spread too wide ({r['min']:.2f}-{r['max']:.2f}, mean {r['mean']:.2f})")
                elif status == "single":
                    bad.append(f"{label}: only 1 round usable, spread cannot be judged")
            if bad:
                out.append(warning("spread", "; ".join(bad), e["phases"] + tcp_phases, w, path))
    return out


# ---------------------------------------------------------------- pure: context


def machine_info(query):
    uname = labels(query, "node_uname_info")
    build = labels(query, "prometheus_build_info")
    cores = scalar(query, 'count(node_cpu_seconds_total{mode="idle"})')
    mem = scalar(query, "max(node_memory_MemTotal_bytes)")
    return {
        "sysname": uname.get("sysname"),
        "release": uname.get("release"),
        "machine": uname.get("machine"),
        "nodename": uname.get("nodename"),
        "cores": None if cores is None else int(cores),
        "memory_bytes": None if mem is None else int(mem),
        "prometheus_version": build.get("version"),
    }


def env_value(environment, name):
    """A variable from a compose service's environment (a map, or a list of NAME=value)."""
    if isinstance(environment, dict):
        return environment.get(name)
    for item in environment or []:
        if isinstance(item, str) and item.startswith(f"{name}="):
            return item.split("=", 1)[1]
    return None


def compose_info(compose, gen="k6"):
    services = (compose or {}).get("services") or {}
    limits = {}
    for name in ("app", "nginx", gen):
        s = services.get(name) or {}
        limits[name] = {"cpus": s.get("cpus"), "cpuset": s.get("cpuset") or None, "mem_limit": s.get("mem_limit")}
    limits["nginx"]["worker_processes"] = env_value((services.get("nginx") or {}).get("environment"), "NGINX_WORKER_PROCESSES")
    return {"images": {n: s.get("image") for n, s in sorted(services.items())}, "limits": limits}


def build_report(k6, compose, query, prometheus_url=None):
    """Everything report.json holds, from the inputs and a query function."""
    settings = k6.get("settings") or {}
    machine = machine_info(query)  # first query: a Prometheus that does not answer stops here
    gen = generator(settings)
    comp = compose_info(compose, gen)
    phases = phase_figures(k6, query)
    workloads = aggregate(phases, settings)
    for w, wl in workloads.items():
        wl["breakdown"] = breakdown(phases, w)
        wl["answer"] = answer(w, phases, settings)
    k6_cpus = number(comp["limits"][gen]["cpus"])
    warnings = []
    if k6.get("start_ms") is None:
        warnings.append(warning("no_start_time", "load.json has no start_ms: Prometheus figures cannot be placed in time", [p["name"] for p in phases]))
    short = [p["name"] for p in phases if (p["window"] and p["window"]["end_s"] - p["window"]["start_s"] < MIN_PHASE_S)]
    if short:
        warnings.append(warning("short_phase", f"phases shorter than {MIN_PHASE_S} s: Prometheus scrapes every 5 s, "
                                "so their server-side figures are missing or rough; use DURATION >= 10", short))
    if k6.get("thresholds_failed"):
        warnings.append(warning("k6_thresholds", f"k6 thresholds failed: {', '.join(k6['thresholds_failed'])}", []))
    if is_max(settings) and phases and all(p["figures"].get("k6_cpu_cores") is None for p in phases):
        why = common_reason(phases, "k6_cpu_cores") or "no value"
        warnings.append(warning(
            "generator_cpu_unknown",
            f"{gen}'s CPU is unknown ({why}): nothing rules out that {gen}, not the paths, set these "
            f"limits; compare with GENERATOR=wrk or scripts/bench_wrk.py", [p["name"] for p in phases]))
    # A target rate exists only in rate mode; in max mode the generator sets the pace.
    warnings += phase_warnings(phases, None if is_max(settings) else settings.get("rate"), k6_cpus, gen)
    warnings += ratio_warnings(workloads, settings)
    warnings += figure_warnings(phases)
    templates = server_queries("<path>", 0, 0.0)
    return {
        "testid": k6.get("testid"),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "prometheus": prometheus_url,
        "start_ms": k6.get("start_ms"),
        "gap_s": k6.get("gap_s"),
        "settings": settings,
        "machine": machine,
        "compose": comp,
        "totals": k6.get("totals"),
        "thresholds_failed": k6.get("thresholds_failed") or [],
        "phases": phases,
        "workloads": workloads,
        "generator": gen,
        "mode": settings.get("mode") or "rate",
        "headline": headline(settings),
        "warnings": warnings,
        "charts": [],
        "queries": {k: v.replace("[0s] @ 0.000", "[<duration>s] @ <window end>") for k, v in templates.items()},
    }


# ---------------------------------------------------------------- rendering: Markdown


def fmt(v, decimals=2, suffix=""):
    if v is None:
        return "n/a"
    return f"{v:,.{decimals}f}{suffix}"


def fmt_bytes(v):
    n = number(v)
    if n is None:
        return str(v) if v not in (None, "") else "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(v)


def fmt_ratio(r):
    if r is None:
        return "n/a"
    if r["rounds"] < 2:
        return f"{r['mean']:.2f}x (1 round)"
    return f"{r['mean']:.2f}x ({r['min']:.2f}-{r['max']:.2f})"


def errors_cell(entry):
    failed = entry["max"]["failed_rate"] or 0
    five = entry["max"]["nginx_5xx"]
    parts = []
    if failed > 0:
        parts.append(f"k6 failed up to {failed:.2%}")
    if five:
        parts.append(f"nginx 5xx up to {five:.0f}/round")
    return ", ".join(parts) if parts else ("none" if five is not None else "none (k6); nginx n/a")


def machine_block(rep):
    m, c, s = rep["machine"], rep["compose"], rep["settings"]
    lim = c["limits"]
    lines = [
        f"- Host: {m['sysname'] or 'n/a'} {m['release'] or ''} {m['machine'] or ''} (node {m['nodename'] or 'n/a'}), "
        f"{m['cores'] if m['cores'] is not None else 'n/a'} cores, {fmt_bytes(m['memory_bytes'])} memory",
        f"- Prometheus {m['prometheus_version'] or 'n/a'}" + (f" at {rep['prometheus']}" if rep.get("prometheus") else ""),
    ]
    gen = generator(s)
    for name in ("app", "nginx", gen):
        l = lim[name]
        extra = f", worker_processes {l['worker_processes']}" if name == "nginx" else ""
        lines.append(
            f"- {name}: cpus {l['cpus'] if l['cpus'] is not None else 'n/a'}, cpuset {l['cpuset'] or 'any'}, "
            f"memory {fmt_bytes(l['mem_limit'])}{extra}"
        )
    images = ", ".join(f"{n} `{i}`" for n, i in c["images"].items() if i) or "n/a (no compose.json)"
    lines.append(f"- Images: {images}")
    pace = ("connections",) if is_max(s) else ("rate",)
    keys = ("mode", "workloads", "paths") + pace + ("duration", "rounds", "warmup", "endpoint", "cpu_iterations", "sleep_ms")
    shown = ", ".join(f"{k}={','.join(map(str, s[k])) if isinstance(s.get(k), list) else s.get(k)}" for k in keys if k in s)
    lines.append(f"- Load generator {gen}: {shown}; gap between phases {rep.get('gap_s')} s")
    return lines


def na_cell(entry, key, decimals):
    """A mean, or n/a with the reason when every round misses it for one reason."""
    v = entry["mean"][key]
    if v is not None:
        return fmt(v, decimals)
    why = (entry.get("missing") or {}).get(key)
    return f"n/a ({why.split(' (')[0]})" if why else "n/a"  # the warnings give the rest


def workload_section(w, wl, charts, settings=None):
    settings = settings or {}
    lines = [f"## Workload `{w}`", ""]
    lines += [
        "Means over the measured rounds (warm-up left out).",
        "",
        "| path | req/s | client p50 | p95 | p99 (ms) | app p50 | p99 (ms) | nginx connect (ms) | app CPU µs/req | nginx CPU µs/req | ctx switches/req | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for path, e in wl["paths"].items():
        m = e["mean"]
        nginx_cpu = na_cell(e, "nginx_cpu_us_per_req", 1)
        lines.append(
            f"| {path} | {fmt(m['rps'], 1)} | {fmt(m['client_p50_ms'], 3)} | {fmt(m['client_p95_ms'], 3)} | "
            f"{fmt(m['client_p99_ms'], 3)} | {fmt(m['app_p50_ms'], 3)} | {fmt(m['app_p99_ms'], 3)} | "
            f"{fmt(m['nginx_connect_ms'], 3)} | {fmt(m['app_cpu_us_per_req'], 1)} | {nginx_cpu} | "
            f"{na_cell(e, 'ctx_switches_per_req', 2)} | {errors_cell(e)} |"
        )
    lines.append("")
    if not wl["tcp_measured"]:
        lines += ["tcp was not measured in this run: no ratios to tcp.", ""]
    else:
        lines += [
            "Ratio to tcp, computed per round (path's round r / tcp's round r), then the mean and (min-max) over rounds. "
            "Below 1: less than tcp.",
            "",
            f"| path | req/s ratio | p50 ratio (min-max) | p99 ratio | app CPU ratio | nginx CPU ratio | ctx switches ratio | verdict ({METRICS[headline(settings)[0]][0]}) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for path, e in wl["paths"].items():
            r = e["ratio_to_tcp"]
            if r is None:
                continue
            lines.append(
                f"| {path} | {fmt_ratio(r['rps'])} | {fmt_ratio(r['client_p50_ms'])} | {fmt_ratio(r['client_p99_ms'])} | "
                f"{fmt_ratio(r['app_cpu_us_per_req'])} | {fmt_ratio(r['nginx_cpu_us_per_req'])} | "
                f"{fmt_ratio(r['ctx_switches_per_req'])} | {e['verdict']} |"
            )
        lines.append("")
    lines += breakdown_table(wl.get("breakdown") or {})
    for c in charts:
        if c["workload"] == w:
            lines += [f"![{c['title']}]({c['file']})", ""]
    return lines


def breakdown_table(terms):
    """Where the time goes: each term's difference, per figure, in µs."""
    if not terms:
        return []
    lines = [
        "Where the time goes: one path minus another, round by round; mean (min to max over rounds, share of the "
        "second path's figure). A spread that includes 0 is no measurable difference.",
        "",
        "| term | paths | " + " | ".join(f"{label} (µs)" for _, label, _ in TERM_FIGURES) + " |",
        "| --- | --- |" + " --- |" * len(TERM_FIGURES),
    ]
    for t in terms.values():
        cells = " | ".join(fmt_diff(t["figures"].get(f)) for f, _, _ in TERM_FIGURES)
        lines.append(f"| {t['label']} | {t['minuend']} − {t['subtrahend']} | {cells} |")
    return lines + [""]


def render_markdown(rep):
    lines = [f"# uds-lab report: run `{rep['testid']}`", "", "## The answer", ""]
    for wl in rep["workloads"].values():
        lines += [wl.get("answer") or "", ""]
    lines += [
        "These figures hold for this machine, these limits and these settings only. "
        + ("In max mode each path ran flat out: requests/s is its limit, unless a warning says the load generator "
        "was. " if is_max(rep["settings"]) else "Every phase ran at the same fixed rate. ")
        + f"Client figures are {rep['generator']}'s own statistics per phase; server figures come from Prometheus over each phase's window (scraped every few "
        "seconds, so they are estimates, `increase()` extrapolated to the window).",
        "",
        "## Machine, versions, settings",
        "",
    ]
    lines += machine_block(rep) + [""]
    for w, wl in rep["workloads"].items():
        lines += workload_section(w, wl, rep["charts"], rep["settings"])
    lines += ["## Warnings", ""]
    if rep["warnings"]:
        for wn in rep["warnings"]:
            where = " / ".join(x for x in (wn["workload"], wn["path"]) if x)
            phases = f" Phases: {', '.join(wn['phases'])}." if wn["phases"] else ""
            lines.append(f"- **{wn['kind']}**{' (' + where + ')' if where else ''}: {wn['message']}.{phases}")
    else:
        lines.append("- none")
    lines += [
        "",
        "## How to read this",
        "",
        "- nginx logs its upstream times with 1 ms resolution: a sub-millisecond connect reads 0, so the connect "
        "mean only moves when connecting takes milliseconds (under load or queueing). Client and app latencies have "
        "sub-millisecond resolution.",
        "- A ratio's (min-max) is its spread over the rounds. A spread that includes 1.0 means the rounds disagree "
        f"on which path is faster: no clear difference. A spread wider than {MAX_RELATIVE_SPREAD:.0%} of the mean is "
        "too wide to quote.",
        f"- Warnings and their thresholds: **saturated** when the generator dropped more than {MAX_DROPPED_SHARE:.0%} "
        f"of a phase's iterations, held less than {MIN_RATE_SHARE:.0%} of RATE, or used {MAX_K6_CPU_SHARE:.0%} or more "
        f"of its CPU limit (fewer drops are shown in the tables, not warned about); **short_phase** under "
        f"{MIN_PHASE_S} s (two scrapes); **same_ceiling** (max mode) when every path is within "
        f"{SAME_CEILING - 1:.0%} of the others; **spread** as above; **errors** on any failed request or nginx 5xx.",
        "- Context switches are the whole host's, per request the load generator completed: other work on the host "
        "adds to them.",
        "- Where the time goes: `tcp` and `tcp-ka` cross the Docker bridge (veth pair, bridge, two network "
        "namespaces) to the app; `tcp-lo` and `tcp-lo-ka` come from nginx-lo, the same nginx in the app's network "
        "namespace, over loopback; `uds*` use the Unix socket. The control `uds-lo` (the socket through nginx-lo) "
        "should match `uds`: the difference between them is what the two nginx instances alone account for.",
        "- nginx CPU per request needs cAdvisor, context switches node-exporter; `make up` leaves them out where "
        "they cannot run (`make doctor` says why). A figure that is n/a in every round says why in its cell; the "
        "warnings list the rest. Where a collector samples less often than a phase is long (cAdvisor: every 5-10 s), "
        "the figure is read from the samples around the phase's window, an estimate the warnings name.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- rendering: charts (I/O)


def chart_specs(w, wl, settings=None):
    """Which charts a workload gets: (file, title, [(metric, subplot title, unit)]), empty series left out."""
    has = lambda k: any(e["mean"][k] is not None for e in wl["paths"].values())  # noqa: E731
    specs = []
    if is_max(settings or {}) and has("rps"):
        specs.append((f"{w}-throughput.png", f"{w}: requests/s per path at the limit (mean of rounds, bars: min-max)",
                      [("rps", "requests/s", "req/s")]))
    lat = [(k, t, "ms") for k, t in (("client_p50_ms", "client p50"), ("client_p99_ms", "client p99")) if has(k)]
    if lat:
        specs.append((f"{w}-latency.png", f"{w}: client latency per path (mean of rounds, bars: min-max)", lat))
    cost = [(k, t, "µs/request") for k, t in (("app_cpu_us_per_req", "app CPU"), ("nginx_cpu_us_per_req", "nginx CPU")) if has(k)]
    if cost:
        specs.append((f"{w}-cost.png", f"{w}: CPU per request (mean of rounds, bars: min-max)", cost))
    return specs


# The stacked "where the time goes" chart: each bar is a path, built up from
# uds-ka (the socket, pooled) by the terms that separate it from uds-ka.
STACK_BASE = "uds-ka"
STACKS = [
    ("uds-ka", []),
    ("tcp-lo-ka", ["tcp_vs_uds_pooled"]),
    ("tcp-ka", ["tcp_vs_uds_pooled", "bridge_pooled"]),
    ("uds", ["uds_connect"]),
    ("tcp-lo", ["tcp_vs_uds_pooled", "tcp_lo_connect"]),
    ("tcp", ["tcp_vs_uds_pooled", "bridge_pooled", "tcp_connect"]),
]
STACK_PARTS = {  # term -> (legend, colour)
    "base": ("the socket, pooled (uds-ka)", "#8F8F8F"),
    "tcp_vs_uds_pooled": ("TCP stack against the socket", "#FF9830"),
    "bridge_pooled": ("the Docker bridge", "#F2495C"),
    "tcp_connect": ("connection setup", "#B877D9"),
    "tcp_lo_connect": ("connection setup", "#B877D9"),
    "uds_connect": ("connection setup", "#B877D9"),
}


def stack_bars(wl, key, scale):
    """[(path, [(part, value, measurable)])] for the paths whose terms were all measured."""
    base = (wl["paths"].get(STACK_BASE) or {}).get("mean", {}).get(key)
    if base is None:
        return []
    bars = []
    for path, terms in STACKS:
        if path not in wl["paths"]:
            continue
        ds = [((wl.get("breakdown") or {}).get(t) or {}).get("figures", {}).get(key) for t in terms]
        if any(d is None for d in ds):
            continue
        bars.append((path, [("base", base * scale, True)] + [(t, d["mean"], measurable(d)) for t, d in zip(terms, ds)]))
    return bars


def write_breakdown_chart(plt, w, wl, out_dir):
    """The stacked chart, one panel per figure that has bars; None when there is nothing to stack."""
    panels = [(f, label, scale, stack_bars(wl, f, scale)) for f, label, scale in TERM_FIGURES]
    panels = [p for p in panels if len(p[3]) > 1]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 1, 4.6), squeeze=False)
    for ax, (_, label, _, bars) in zip(axes[0], panels):
        seen = set()
        for x, (path, parts) in enumerate(bars):
            bottom = 0.0
            for part, v, ok in parts:
                legend, colour = STACK_PARTS[part]
                ax.bar(x, v, bottom=bottom, color=colour, hatch=None if ok else "//", edgecolor="white",
                       label=None if legend in seen else legend)
                seen.add(legend)
                bottom += v
            ax.text(x, bottom, f"{bottom:,.0f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(bars)), [p for p, _ in bars])
        ax.set_title(label)
        ax.set_ylabel("µs")
        ax.margins(y=0.12)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="upper left")
    title = f"{w}: where the time goes (means over rounds; hatched: no measurable difference)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fname = f"{w}-breakdown.png"
    fig.savefig(Path(out_dir) / fname, dpi=100)
    plt.close(fig)
    return {"workload": w, "file": fname, "title": title}


def write_charts(rep, out_dir):
    """PNG charts per workload; returns [{workload, file, title}]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for w, wl in rep["workloads"].items():
        paths = list(wl["paths"])
        for fname, title, panels in chart_specs(w, wl, rep["settings"]):
            fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels) + 1, 4.2), squeeze=False)
            for ax, (key, sub, unit) in zip(axes[0], panels):
                means = [wl["paths"][p]["mean"][key] for p in paths]
                xs = list(range(len(paths)))
                heights = [m if m is not None else 0 for m in means]
                lo = [(m - wl["paths"][p]["min"][key]) if m is not None else 0 for p, m in zip(paths, means)]
                hi = [(wl["paths"][p]["max"][key] - m) if m is not None else 0 for p, m in zip(paths, means)]
                ax.bar(xs, heights, color=[PATH_COLOURS.get(p, "grey") for p in paths], yerr=[lo, hi], capsize=5)
                for x, m in zip(xs, means):
                    if m is None:
                        ax.text(x, 0, "n/a", ha="center", va="bottom")
                ax.set_xticks(xs, paths)
                ax.set_title(sub)
                ax.set_ylabel(unit)
                ax.grid(axis="y", alpha=0.3)
            fig.suptitle(title, fontsize=10)
            fig.tight_layout()
            fig.savefig(Path(out_dir) / fname, dpi=100)
            plt.close(fig)
            written.append({"workload": w, "file": fname, "title": title})
        if not is_max(rep["settings"]):
            chart = write_breakdown_chart(plt, w, wl, out_dir)
            if chart:
                written.append(chart)
    return written


# ---------------------------------------------------------------- I/O: files and main


def read_json(path, required=True):
    p = Path(path)
    if not p.is_file():
        if required:
            raise ReportError(f"{p} not found (run `make load` first, or pass --run <testid>)")
        return None
    try:
        return json.loads(p.read_text())
    except ValueError as e:
        raise ReportError(f"{p} is not valid JSON: {e}") from e


def run(run_id, prometheus_url, results_dir, query=None):
    """Reads the inputs, builds the report, writes report.md, report.json and charts; returns the report."""
    run_dir = Path(results_dir) / run_id
    k6 = read_json(run_dir / "load.json")
    compose = read_json(run_dir / "compose.json", required=False)
    query = query or prometheus_client(prometheus_url)
    rep = build_report(k6, compose, query, prometheus_url)
    if compose is None:
        rep["warnings"].insert(0, warning("no_compose", f"{run_dir / 'compose.json'} not found: images and limits unknown", []))
    rep["charts"] = write_charts(rep, run_dir)
    (run_dir / "report.json").write_text(json.dumps(rep, indent=1, ensure_ascii=False) + "\n")
    (run_dir / "report.md").write_text(render_markdown(rep))
    return rep


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="the run's testid: results/<run>/load.json")
    ap.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus base URL")
    ap.add_argument("--results", default="results", help="folder holding <run>/")
    args = ap.parse_args(argv)
    if not args.run or "/" in args.run or args.run in (".", ".."):
        print(f"report: --run {args.run!r}: give a testid (a folder name under {args.results})", file=sys.stderr)
        return 2
    try:
        rep = run(args.run, args.prometheus, args.results)
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    out = Path(args.results) / args.run
    print(f"wrote {out / 'report.md'}, {out / 'report.json'} and {len(rep['charts'])} chart(s)")
    for wn in rep["warnings"]:
        print(f"warning: {wn['kind']}: {wn['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
