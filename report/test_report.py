"""Tests of the report package: the pure parts with synthetic load.json data
and a fake query function, the charts, and `python3 -m report` end to end
against a fake Prometheus. No network beyond 127.0.0.1, no Docker."""
import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from report import charts, cli, context, idle, markdown, queries, stats, values, words
from report.prometheus import prometheus_client
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


# ---------------------------------------------------------------- figures per phase


def test_warmup_phases_are_left_out():
    k6 = make_k6(client=lambda p, r: {"duration_ms": {"p50": 500.0}, "dropped_iterations": 99} if r == 0 else {})
    rep = build(k6)
    assert all(p["round"] >= 1 for p in rep["phases"])
    assert len(rep["phases"]) == 4 * 3
    tcp = rep["workloads"]["ping"]["paths"]["tcp"]
    assert tcp["rounds"] == [1, 2, 3]
    assert tcp["mean"]["client_p50_ms"] == pytest.approx(1.0)
    assert "saturated" not in kinds(rep)  # the warm-up's dropped iterations do not count


def test_window_and_query_shape():
    k6 = make_k6(paths=("tcp", "uds"), rounds=1, warmup=5, duration=20)
    q = fake_query(server_table(k6))
    context.build_report(k6, COMPOSE, q)
    # Idle 10 + 1 s, warm-up: 2 x (5 + 1) s; then the first path of round 1 from 23 s for 20 s.
    ph = queries.measured_phases(k6)[0]
    assert queries.phase_window(k6, ph) == (START_MS / 1000 + 23, START_MS / 1000 + 43)
    end = f"{START_MS / 1000 + 43:.3f}"
    expected = f'sum(increase(nginx_location_requests_total{{job="nginx-log",path="{ph["path"]}",status=~"5.."}}[20s] @ {end}))'
    assert expected in q.calls
    sel = 'job="app",route!~"/metrics|/healthz|/readyz"}[20s] @ ' + end
    assert any(c.startswith("histogram_quantile(0.99, sum(increase(app_http_request_duration_seconds{" + sel)
               and "sum by (le) (increase(app_http_request_duration_seconds_bucket{" + sel in c for c in q.calls)


def test_client_and_server_figures():
    k6 = make_k6(paths=("tcp",), rounds=1, rate=100, duration=10)
    f = build(k6)["phases"][0]["figures"]
    assert f["requests"] == 1000
    assert f["rps"] == pytest.approx(100)
    assert f["client_p99_ms"] == pytest.approx(3.0)
    assert f["app_p50_ms"] == pytest.approx(0.4)
    assert f["app_p99_ms"] == pytest.approx(2.0)
    assert f["app_cpu_us_per_req"] == pytest.approx(50)
    assert f["nginx_cpu_us_per_req"] == pytest.approx(80)
    assert f["app_ctx_switches_per_req"] == pytest.approx(2.5)
    # (4000 - 100/s idle x 10 s) / 1000 requests
    assert f["host_ctx_switches_per_req"] == pytest.approx(3)
    assert f["nginx_connect_ms"] == pytest.approx(0.001)
    assert f["nginx_5xx"] == 0  # no series: none logged
    assert f["generator_cpu_cores"] == pytest.approx(0.5)


# ---------------------------------------------------------------- ratios


def test_ratios_are_computed_per_round_then_averaged():
    p50 = {("tcp", 1): 1.0, ("tcp", 2): 2.0, ("tcp", 3): 4.0, ("uds", 1): 0.5, ("uds", 2): 1.2, ("uds", 3): 2.8}
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"duration_ms": {"p50": p50[(p, r)]}} if r else {})
    r = build(k6)["workloads"]["ping"]["paths"]["uds"]["ratio_to_tcp"]["client_p50_ms"]
    assert r["per_round"] == pytest.approx({"1": 0.5, "2": 0.6, "3": 0.7})
    # The geometric mean of the per-round ratios; the ratio of the means would be 4.5 / 7 = 0.643.
    assert r["mean"] == pytest.approx((0.5 * 0.6 * 0.7) ** (1 / 3))
    assert (r["min"], r["max"], r["rounds"]) == (pytest.approx(0.5), pytest.approx(0.7), 3)
    # A t-interval on the log ratios (2 degrees of freedom) excludes 1 on its own (p 0.03), but not once
    # the report's comparisons but the answer's are judged together (Benjamini-Hochberg, at 1%: p_fdr 5 p).
    assert r["lo"] < r["mean"] < r["hi"] < 1 and r["p"] < 0.05 <= r["p_fdr"] and stats.judge(r) == "straddles"
    assert r["p_fdr"] == pytest.approx(5 * r["p"]) and r["fdr_family"] == 1
    assert "once the report's 1 comparisons are judged together" in \
        build(k6)["workloads"]["ping"]["paths"]["uds"]["verdict"]


def test_clear_ratio_and_verdict():
    p50 = {"tcp": [1.0, 1.1, 0.9], "uds": [0.62, 0.66, 0.522]}
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"duration_ms": {"p50": p50[p][r - 1]}} if r else {})
    rep = build(k6)
    e = rep["workloads"]["ping"]["paths"]["uds"]
    assert stats.judge(e["ratio_to_tcp"]["client_p50_ms"]) == "clear"
    assert e["verdict"] == "uds 0.60x tcp (95% CI 0.55-0.65x, 3 rounds)"
    assert rep["workloads"]["ping"]["paths"]["tcp"]["ratio_to_tcp"] is None


def test_server_side_ratio_per_round():
    k6 = make_k6(paths=("tcp", "uds-ka"))
    cpu = {("tcp", 1): 0.05, ("tcp", 2): 0.06, ("tcp", 3): 0.05, ("uds-ka", 1): 0.02, ("uds-ka", 2): 0.03, ("uds-ka", 3): 0.02}
    rep = build(k6, server_table(k6, process_cpu_seconds_total=by_phase(k6, lambda p, r: cpu[(p, r)])))
    r = rep["workloads"]["ping"]["paths"]["uds-ka"]["ratio_to_tcp"]["app_cpu_us_per_req"]
    assert r["per_round"] == pytest.approx({"1": 0.4, "2": 0.5, "3": 0.4})
    assert rep["workloads"]["ping"]["paths"]["tcp"]["mean"]["app_cpu_us_per_req"] == pytest.approx(160 / 3)


def test_ratio_skips_rounds_without_a_value():
    r = stats.ratio_stats({1: 2.0, 2: None, 3: 3.0}, {1: 4.0, 2: 1.0, 3: 0.0})
    assert (r["mean"], r["min"], r["max"], r["rounds"], r["per_round"]) == (0.5, 0.5, 0.5, 1, {"1": 0.5})
    assert (r["lo"], r["hi"], r["p"]) == (None, None, None)  # 1 round: no interval
    assert stats.ratio_stats({1: None}, {1: 1.0}) is None
    assert stats.verdict("uds", None) == "n/a"


# ---------------------------------------------------------------- warnings


def test_saturation_by_dropped_iterations_and_rate():
    def client(p, r):
        if p == "uds" and r == 2:
            return {"dropped_iterations": 12, "requests": 988}  # 1.2% of 1000 planned
        if p == "tcp-ka" and r == 3:
            return {"requests": 940}  # 94 req/s < 95% of 100
        return {}

    rep = build(make_k6(client=client))
    sat = [w for w in rep["warnings"] if w["kind"] == "saturated"]
    assert {(w["path"], tuple(w["phases"])) for w in sat} == {("uds", ("ping__uds__r2",)), ("tcp-ka", ("ping__tcp-ka__r3",))}
    assert all("k6 was the limit: figures describe k6, not the path" in w["message"] for w in sat)


@pytest.mark.parametrize("late, saturated", [(None, False), (0.05, False), (0.0501, True)])
def test_requests_sent_late_make_the_generator_the_limit(late, saturated):
    """openloop's late share: over 5% of a phase's requests more than 1 ms
    behind their due time, the generator set the pace (exactly 5%: not yet)."""
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"late_rate": late} if p == "uds" and r == 2 else {})
    sat = [w for w in build(k6)["warnings"] if w["kind"] == "saturated"]
    assert bool(sat) == saturated
    if saturated:
        assert sat[0]["phases"] == ["ping__uds__r2"] and "5.0% of requests sent over 1 ms late" in sat[0]["message"]


@pytest.mark.parametrize("dropped, requests, saturated", [
    (4, 4996, False),   # 0.08%: a hiccup, not saturation
    (10, 990, False),   # exactly 1%: at the threshold, no warning
    (11, 989, True),    # 1.1%: over it
])
def test_dropped_iterations_threshold(dropped, requests, saturated):
    k6 = make_k6(paths=("tcp", "uds"), rate=500, client=lambda p, r: {"dropped_iterations": dropped, "requests": requests} if p == "uds" else {})
    # 989 requests at RATE 100 x 10 s is 98.9% of the rate: only the drops can warn.
    k6["settings"]["rate"] = requests / 10 if requests < 1000 else 500
    rep = build(k6)
    assert ("saturated" in kinds(rep)) == saturated


@pytest.mark.parametrize("requests, saturated", [(950, False), (949, True)])
def test_rate_threshold(requests, saturated):
    k6 = make_k6(paths=("tcp", "uds"), rate=100, client=lambda p, r: {"requests": requests} if p == "uds" else {})
    assert ("saturated" in kinds(build(k6))) == saturated


def test_thresholds_are_stated():
    md = markdown.render_markdown(build(make_k6()))
    for text in ("more than 1% of a phase's requests", "more than 5% over 1 ms behind", "less than 95% of RATE", "90% or more of its CPU limit",
                 "under 5 s", "within 5% of the others", "An interval that includes no difference is shown in its table"):
        assert text in md


def test_how_to_read_this_is_the_codes_method_and_constants(monkeypatch):
    """"How to read this" said the answer came from the rounds ("Every
    difference and ratio comes with its 95% interval, from the paired
    per-round values") after the stream had replaced them: it is made from
    the constants and the method the code uses, and follows them."""
    from report import interleaved, markdown_howto
    rep = build(make_k6())
    how = markdown.render_markdown(rep).split("## How to read this")[1]
    assert "from the paired per-round values" not in how
    assert interleaved.METHOD.split(",")[1].strip().startswith("t-interval with an equal-weighted cosine")
    assert "equal-weighted cosine estimator's, on floor(0.4 n^(2/3)) degrees of freedom (6 at 60 blocks)" in how
    assert "a block's median needs 5 successful requests on each path, an interval 10 blocks" in how
    assert "failed more than 1% of its requests gets no verdict" in how and "no difference larger than ±2%" in how
    monkeypatch.setattr(markdown_howto, "MIN_BLOCK_REQUESTS", 7)
    monkeypatch.setattr(markdown_howto, "MAX_FAILED_SHARE", 0.03)
    how = markdown.render_markdown({**rep, "margin_pct": 5}).split("## How to read this")[1]
    assert "needs 7 successful requests" in how and "more than 3% of its requests" in how and "±5%" in how


def test_the_report_says_the_apps_figures_are_the_apps_own():
    """The app under test exports its own costs: a swapped-in image could say anything (docs/design.md)."""
    md = markdown.render_markdown(build(make_k6()))
    assert "the app under test measures itself" in md and "Prometheus keeps of each target only its own series" in md


def test_saturation_by_k6_cpu():
    k6 = make_k6(paths=("tcp", "uds"))
    # k6 has cpus 2 in COMPOSE: 1.8 cores is 90%.
    table = server_table(k6, {("container_cpu_usage_seconds_total", 'service="k6"'): by_phase(k6, lambda p, r: 1.8 if p == "uds" else 1.0)})
    rep = build(k6, table)
    sat = [w for w in rep["warnings"] if w["kind"] == "saturated"]
    assert [w["path"] for w in sat] == ["uds"]
    assert sat[0]["phases"] == ["ping__uds__r1", "ping__uds__r2", "ping__uds__r3"]
    # Without compose.json (no k6 limit) k6's CPU cannot be judged: no warning.
    assert "saturated" not in kinds(build(k6, table, compose=None))


def test_errors_from_k6_and_nginx():
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"failed_rate": 0.01} if (p, r) == ("tcp", 1) else {})
    table = server_table(k6, nginx_location_requests_total=by_phase(k6, lambda p, r: 7 if (p, r) == ("uds", 3) else None))
    rep = build(k6, table)
    errs = {w["path"]: w for w in rep["warnings"] if w["kind"] == "errors"}
    assert errs["tcp"]["phases"] == ["ping__tcp__r1"] and "1.00%" in errs["tcp"]["message"]
    assert errs["uds"]["phases"] == ["ping__uds__r3"] and "nginx 5xx 7" in errs["uds"]["message"]
    md = markdown.render_markdown(rep)
    assert "nginx 5xx up to 7/round" in md


def test_a_wrk_runs_errors_are_named_wrks():
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"failed_rate": 0.02} if (p, r) == ("uds", 1) else {})
    k6["settings"].update(mode="max", generator="wrk", threads=1)
    del k6["settings"]["rate"]
    rep = build(k6)
    md = markdown.render_markdown(rep)
    assert "wrk failed up to 2.00%" in md and "k6 failed" not in md
    (err,) = [w for w in rep["warnings"] if w["kind"] == "errors"]
    assert "wrk failed 2.00%" in err["message"]


def test_ratios_whose_interval_includes_one_are_said_in_their_table_not_warned_about():
    p50 = {"tcp": [1.0, 1.0, 1.0], "uds": [0.9, 1.05, 0.95]}
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"duration_ms": {"p50": p50[p][r - 1]}} if r else {})
    rep = build(k6)
    e = rep["workloads"]["ping"]["paths"]["uds"]
    assert e["verdict"] == "no measurable difference from tcp (95% CI 0.79-1.17x, 3 rounds)"
    assert "spread" not in kinds(rep)
    md = markdown.render_markdown(rep)
    # Its interval in the table; identical rounds (client p99): no spread, so no interval and no verdict.
    assert "| uds | 1.00x (1 round" not in md and "0.96x (0.79-1.17)" in md and "1.00x (3 rounds, all equal)" in md


def test_single_round():
    rep = build(make_k6(paths=("tcp", "uds"), rounds=1, client=lambda p, r: {"duration_ms": {"p50": 0.5}} if p == "uds" else {}))
    assert "single_round" not in kinds(rep) and "spread" not in kinds(rep)
    assert rep["workloads"]["ping"]["paths"]["uds"]["verdict"] == "uds 0.50x tcp (1 round: no interval, no verdict)"
    assert "0.50x (1 round)" in markdown.render_markdown(rep)


def test_tcp_missing():
    rep = build(make_k6(paths=("uds", "uds-ka")))
    assert "tcp_missing" not in kinds(rep)  # said under the table, no action to take
    wl = rep["workloads"]["ping"]
    assert wl["tcp_measured"] is False
    assert all(e["ratio_to_tcp"] is None for e in wl["paths"].values())
    md = markdown.render_markdown(rep)
    assert "tcp was not measured in this run" in md
    assert "| uds | 100.0 |" in md


# ---------------------------------------------------------------- null handling


def test_missing_series_are_null_not_zero():
    k6 = make_k6(paths=("tcp", "uds"))
    rep = build(k6, dict(MACHINE))  # no server series at all
    f = rep["phases"][0]["figures"]
    for k in ("app_p50_ms", "app_cpu_us_per_req", "app_ctx_switches_per_req", "nginx_cpu_us_per_req",
              "host_ctx_switches_per_req", "nginx_connect_ms", "generator_cpu_cores"):
        assert f[k] is None, k
    assert f["nginx_5xx"] == 0
    r = rep["workloads"]["ping"]["paths"]["uds"]["ratio_to_tcp"]
    assert r["app_cpu_us_per_req"] is None and r["client_p50_ms"] is not None
    md = markdown.render_markdown(rep)
    assert "n/a (cAdvisor not running" in md  # no up{job="cadvisor"} at all
    assert "| n/a |" in md


def test_nan_and_zero_denominators():
    k6 = make_k6(paths=("tcp",), rounds=1)
    table = server_table(k6, {"histogram_quantile(0.5,": "NaN", "upstream_connect_seconds_count": 0, "app_http_requests_total": 0})
    f = build(k6, table)["phases"][0]["figures"]
    assert f["app_p50_ms"] is None and f["nginx_connect_ms"] is None and f["app_cpu_us_per_req"] is None


def test_no_start_time_and_no_machine_info():
    k6 = make_k6(paths=("tcp", "uds"))
    k6["start_ms"] = None
    rep = build(k6, {})
    assert "no_start_time" in kinds(rep)
    assert rep["phases"][0]["figures"]["app_p50_ms"] is None
    assert rep["phases"][0]["figures"]["nginx_5xx"] is None
    assert rep["machine"]["cores"] is None
    markdown.render_markdown(rep)  # renders without crashing


def test_compose_info_accepts_list_environment():
    comp = {"services": {"nginx": {"image": "nginx:x", "environment": ["A=1", "NGINX_WORKER_PROCESSES=2"]}}}
    info = context.compose_info(comp)
    assert info["limits"]["nginx"]["worker_processes"] == "2"
    assert info["limits"]["app"] == {"cpus": None, "cpuset": None, "mem_limit": None}
    assert context.compose_info(None)["images"] == {}


# ---------------------------------------------------------------- max mode


def max_k6(rps, **kw):
    """A max-mode run: rps(path) -> requests/s the generator reached on that path."""
    k6 = make_k6(client=lambda p, r: {"requests": rps(p) * 10}, **kw)
    k6["settings"].update({"mode": "max", "connections": 64})
    return k6


def test_max_mode_judges_requests_per_second():
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p]))
    assert rep["mode"] == "max" and rep["headline"][0] == "rps"
    uds = rep["workloads"]["ping"]["paths"]["uds"]
    assert uds["ratio_to_tcp"]["rps"]["mean"] == pytest.approx(2.0)
    assert uds["verdict"].startswith("uds 2.00x tcp")
    # No target rate in max mode: reaching a different rate per path is the point.
    assert "saturated" not in kinds(rep) and "same_ceiling" not in kinds(rep)
    assert "throughput.png" in " ".join(f for f, _, _ in charts.chart_specs("ping", rep["workloads"]["ping"], rep["settings"]))


def test_max_mode_warns_when_every_path_hits_one_ceiling():
    rep = build(max_k6(lambda p: {"tcp": 7500, "uds": 7600, "tcp-ka": 7700, "uds-ka": 7650}[p]))
    ceiling = [w for w in rep["warnings"] if w["kind"] == "same_ceiling"]
    assert len(ceiling) == 1 and "k6's limit" in ceiling[0]["message"] and "GENERATOR=wrk" in ceiling[0]["message"]


def test_generator_is_named_and_its_cpu_queried():
    k6 = max_k6(lambda p: 9000 if p == "tcp" else 18000)
    k6["settings"]["generator"] = "wrk"
    compose = {"services": {**COMPOSE["services"], "wrk": {"image": "uds-lab/wrk:local", "cpus": 1}}}
    q = fake_query(server_table(k6))
    rep = context.build_report(k6, compose, q, "http://prom:9090")
    assert rep["generator"] == "wrk" and all(p["generator"] == "wrk" for p in rep["phases"])
    assert any('container_label_com_docker_compose_service="wrk"' in c for c in q.calls)
    assert rep["compose"]["limits"]["wrk"]["cpus"] == 1
    assert "Load generator wrk" in markdown.render_markdown(rep)


# ---------------------------------------------------------------- report.md and report.json


def test_markdown_has_machine_block_and_tables():
    rep = build(make_k6(workloads=("ping", "bytes-1k")))
    md = markdown.render_markdown(rep)
    assert md.startswith("# uds-lab report: run `t1`")
    assert "Linux 6.8.0 x86_64 (node lab), 8 cores, 16.0 GiB memory" in md
    assert "Prometheus 3.5.1" in md
    assert "nginx: cpus 1, cpuset 0, memory 128.0 MiB, worker_processes 1" in md
    assert "`grafana/k6:1.8.1`" in md
    assert "rate=100" in md and "paths=tcp,uds,tcp-ka,uds-ka" in md
    assert "## Workload `ping`" in md and "## Workload `bytes-1k`" in md
    assert ("| path | req/s | client p50 | p95 | p99 (ms) | app p50 | p99 (ms) | nginx connect (ms) | app CPU µs/req | "
            "app ctx switches/req | nginx CPU µs/req | host ctx switches/req above idle | errors |") in md
    assert "| tcp | 100.0 | 1.000 | 2.000 | 3.000 | 0.400 | 2.000 | 0.001 | 50.0 | 2.50 | 80.0 | 3.00 | none |" in md
    assert ("| path | req/s ratio | p50 ratio (95% CI) | p99 ratio | app CPU ratio | app ctx switches ratio | "
            "nginx CPU ratio | host ctx switches ratio |") in md
    assert "Idle baseline: the host made 100 context switches/s with no requests (10 s before the first phase" in md
    assert "| uds | 1.00x (3 rounds, all equal) |" in md
    assert "1 ms resolution" in md
    assert "this machine" in md
    assert "## Warnings" in md
    json.dumps(rep)  # report.json is plain JSON


# ---------------------------------------------------------------- charts


def test_charts_are_pngs(tmp_path):
    k6 = make_k6(workloads=("ping", "cpu"))
    rep = build(k6)
    written = charts.write_charts(rep, tmp_path)
    assert {c["file"] for c in written} == {"ping-latency.png", "ping-cost.png", "cpu-latency.png", "cpu-cost.png",
                                           "ping-breakdown.png", "cpu-breakdown.png"}
    for c in written:
        assert (tmp_path / c["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_charts_skip_empty_series(tmp_path):
    k6 = make_k6(paths=("tcp", "uds"))
    rep = build(k6, dict(MACHINE))  # no app or nginx CPU series
    written = charts.write_charts(rep, tmp_path)
    # tcp against uds is a term of the breakdown: its chart too.
    assert [c["file"] for c in written] == ["ping-latency.png", "ping-breakdown.png"]
    specs = charts.chart_specs("ping", build(k6, server_table(k6, {("container_cpu_usage_seconds_total", 'service="nginx"'): None}))["workloads"]["ping"])
    assert [k for k, _, _ in specs[1][2]] == ["app_cpu_us_per_req"]


# ---------------------------------------------------------------- end to end


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


class FakePrometheus(BaseHTTPRequestHandler):
    """Answers /api/v1/query from a table like fake_query's."""

    table = {}

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path != "/api/v1/query":
            self.send_error(404)
            return
        expr = urllib.parse.parse_qs(u.query)["query"][0]
        reply_json(self, fake_query(self.table)(expr))

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    k6 = make_k6()
    FakePrometheus.table = server_table(k6)
    with serving(FakePrometheus) as url:
        yield k6, url


def run_script(*args):
    return subprocess.run([sys.executable, "-m", "report", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def test_end_to_end(tmp_path, prometheus):
    k6, url = prometheus
    run_dir = tmp_path / "t1"
    run_dir.mkdir()
    (run_dir / "load.json").write_text(json.dumps(k6))
    (run_dir / "compose.json").write_text(json.dumps(COMPOSE))
    res = run_script("--run", "t1", "--prometheus", url, "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    md = (run_dir / "report.md").read_text()
    rep = json.loads((run_dir / "report.json").read_text())
    assert "| tcp-ka | 100.0 |" in md and "![" in md
    assert rep["testid"] == "t1" and rep["machine"]["prometheus_version"] == "3.5.1"
    assert set(rep["workloads"]["ping"]["paths"]) == {"tcp", "uds", "tcp-ka", "uds-ka"}
    for c in rep["charts"]:
        assert (run_dir / c["file"]).read_bytes()[:4] == b"\x89PNG"
    assert len(rep["charts"]) == 3  # latency, cost, where the time goes


CLUSTER = {"node": "n1", "kubelet": "v1.37.2", "kernel": "6.1.0", "os": "Debian GNU/Linux 12 (bookworm)",
           "runtime": "containerd://2.4.2", "cores": "2", "network_plugin": None, "lo_conntrack_entries": 0,
           "images": {"app": "uds-lab/app:local", "nginx": "nginx:1.30.4", "k6": "grafana/k6:1.8.1"},
           "placement": {"app": ["n1"], "nginx": ["n1"], "openloop": ["n1"], "prometheus": ["n1"]}}


@pytest.mark.parametrize("entries, says", [
    (0, "Loopback in the app's pod: not tracked (0 conntrack entries"),
    (412, "Loopback in the app's pod: tracked (412 conntrack entries"),
    (None, "Loopback in the app's pod: not measured"),
])
def test_a_kubernetes_run_says_where_it_ran_and_how_its_pods_merged(tmp_path, prometheus, entries, says):
    """scripts/k8s.sh's cluster.json in place of compose.json, and a run of
    two k6 pods (loadgen/merge_segments.py's "segments"): the report names the
    node, the pod network, loopback's tracking, and how quantiles were merged."""
    k6, url = prometheus
    run_dir = tmp_path / "t1"
    run_dir.mkdir()
    (run_dir / "load.json").write_text(json.dumps({**k6, "segments": {"pods": 2, "requests": [10, 11],
                                                                      "start_spread_ms": 40}}))
    (run_dir / "cluster.json").write_text(json.dumps({**CLUSTER, "lo_conntrack_entries": entries}))
    res = run_script("--run", "t1", "--prometheus", url, "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    md = (run_dir / "report.md").read_text()
    assert "- Where: Kubernetes v1.37.2, node `n1`" in md and "cross the pod network, not a Docker bridge" in md
    assert says in md
    assert "The generator ran as 2 pods" in md and "the quantile of their pooled requests" in md
    assert "Images: app `uds-lab/app:local`, k6 `grafana/k6:1.8.1`, nginx `nginx:1.30.4`" in md
    assert "Where the time goes (Kubernetes)" in md and "Docker bridge (veth" not in md
    assert "- Placement: nginx and the app on one node (`n1`)" in md
    assert "tracked, as Docker sets it up" not in md and "no_compose" not in res.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_down_exits_2(tmp_path):
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "load.json").write_text(json.dumps(make_k6()))
    url = f"http://127.0.0.1:{free_port()}"
    res = run_script("--run", "t1", "--prometheus", url, "--results", str(tmp_path))
    assert res.returncode == 2
    assert url in res.stderr and "does not answer" in res.stderr
    assert not (tmp_path / "t1" / "report.md").exists()


def test_missing_k6_json_exits_2(tmp_path):
    res = run_script("--run", "nope", "--prometheus", "http://127.0.0.1:1", "--results", str(tmp_path))
    assert res.returncode == 2
    assert str(tmp_path / "nope" / "load.json") in res.stderr
    assert "make report RUN=<testid>" in res.stderr and "--run" not in res.stderr.split("not found")[1]
    assert "there are none: run `make load` first" in res.stderr
    for run_id in ("r1", "r2"):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "load.json").write_text("{}")
    (tmp_path / "failed").mkdir()  # a run that wrote no load.json is not offered
    res = run_script("--run", "nope", "--prometheus", "http://127.0.0.1:1", "--results", str(tmp_path))
    assert res.returncode == 2 and "the runs there: r1, r2\n" in res.stderr


def test_prometheus_client(prometheus):
    _, url = prometheus
    query = prometheus_client(url)
    assert values.scalar(query, "count(node_cpu_seconds_total{mode=\"idle\"})") == 8
    assert values.scalar(query, "no_such_metric") is None  # empty vector: null
    with pytest.raises(values.ReportError, match="HTTP 404"):
        prometheus_client(url + "/wrong")("up")


def test_short_phases_are_flagged():
    rep = build(make_k6(duration=4, rounds=2))
    short = [w for w in rep["warnings"] if w["kind"] == "short_phase"]
    assert len(short) == 1 and len(short[0]["phases"]) == 8 and "DURATION >= 5" in short[0]["message"]
    assert "short_phase" not in kinds(build(make_k6(duration=5, rounds=2)))


def test_max_mode_without_generator_cpu_says_so():
    k6 = max_k6(lambda p: {"tcp": 7500, "uds": 10000, "tcp-ka": 11500, "uds-ka": 12000}[p])
    table = server_table(k6, {("container_cpu_usage_seconds_total", 'service="k6"'): None})
    rep = build(k6, table)
    unknown = [w for w in rep["warnings"] if w["kind"] == "generator_cpu_unknown"]
    assert len(unknown) == 1 and "GENERATOR=wrk" in unknown[0]["message"]
    assert "generator_cpu_unknown" not in kinds(build(k6))  # with cAdvisor's figure


# ---------------------------------------------------------------- where the time goes

SIX = ("tcp", "uds", "tcp-ka", "uds-ka", "tcp-lo", "tcp-lo-ka", "uds-lo")


def p50_run(p50, **kw):
    """A run of the catalogue's paths whose client p50 per path and round (ms) is p50[path][round - 1]."""
    return make_k6(paths=tuple(p50), client=lambda p, r: {"duration_ms": {"p50": p50[p][r - 1]}} if r else {}, **kw)


def test_the_socket_across_the_network_stands_in_only_where_there_is_no_uds_path():
    """catalogue.json's socket_podnet_* terms (uds-lo against tcp, two nginx) are
    the answer's comparison across the network only in a run without uds (a
    Kubernetes run); with uds, the same-nginx pair is, and they are left out."""
    p50 = {"tcp": [1.00, 1.10, 1.05], "tcp-ka": [0.60, 0.62, 0.61], "tcp-lo": [0.80, 0.85, 0.82],
           "tcp-lo-ka": [0.50, 0.52, 0.50], "uds-lo": [0.56, 0.57, 0.55], "uds-lo-ka": [0.45, 0.47, 0.46]}
    on_k8s = build(p50_run(p50))["workloads"]["ping"]
    assert {"socket_podnet_new", "socket_podnet_pooled"} <= set(on_k8s["breakdown"])
    assert "`uds-lo` against `tcp`" in on_k8s["answer"] and "TCP across the network, from the other nginx" in on_k8s["answer"]
    with_uds = build(p50_run({**p50, "uds": [0.55, 0.58, 0.56], "uds-ka": [0.45, 0.47, 0.46]}))["workloads"]["ping"]
    assert "socket_bridge_new" in with_uds["breakdown"] and not {"socket_podnet_new", "socket_podnet_pooled"} & set(with_uds["breakdown"])
    assert "`uds-lo` against `tcp`" not in with_uds["answer"]


def test_breakdown_terms_are_per_round_differences_in_microseconds():
    p50 = {"tcp": [1.00, 1.10, 1.05], "tcp-ka": [0.60, 0.62, 0.61], "tcp-lo": [0.80, 0.85, 0.82],
           "tcp-lo-ka": [0.50, 0.52, 0.50], "uds": [0.55, 0.58, 0.56], "uds-ka": [0.45, 0.47, 0.46],
           "uds-lo": [0.56, 0.57, 0.55]}
    rep = build(p50_run(p50))
    terms = rep["workloads"]["ping"]["breakdown"]
    connect = terms["tcp_connect"]["figures"]["client_p50_ms"]
    assert connect["per_round"] == {"1": pytest.approx(400), "2": pytest.approx(480), "3": pytest.approx(440)}
    assert (connect["mean"], connect["min"], connect["max"]) == (pytest.approx(440), pytest.approx(400), pytest.approx(480))
    # The share is of the first path's figure (tcp's 1,050 µs), in the answer and the table alike.
    assert connect["relative"] == pytest.approx(440 / 1050)
    # 95% t-interval: sd 40 over 3 rounds, t(2) = 4.303.
    assert (connect["lo"], connect["hi"]) == (pytest.approx(440 - 4.3027 * 40 / 3 ** 0.5, abs=0.1),
                                              pytest.approx(440 + 4.3027 * 40 / 3 ** 0.5, abs=0.1))
    # The bridge, less the two nginx's own difference: (tcp - tcp-lo) - (uds - uds-lo) per round.
    bridge = terms["bridge_new"]["figures"]["client_p50_ms"]
    assert bridge["per_round"] == {"1": pytest.approx(210), "2": pytest.approx(240), "3": pytest.approx(220)}
    assert stats.measurable(connect) and stats.measurable(bridge)
    # The control: uds against uds-lo, -10, +10, +10 µs: its interval includes zero.
    control = terms["control_new"]["figures"]["client_p50_ms"]
    assert not stats.measurable(control)
    assert words.fmt_diff(control).startswith("no measurable difference (95% CI ")
    # uds-lo-ka was not measured: the terms that need it are left out, not zero.
    assert "control_pooled" not in terms and "bridge_pooled" not in terms and "socket_pooled" not in terms
    md = markdown.render_markdown(rep)
    assert ("| TCP connection setup, across the bridge | tcp − tcp-ka | 440.0 µs (95% CI 340.6 to 539.4 µs, "
            "3 rounds, 42% of the first)") in md
    assert "tcp − tcp-lo − (uds − uds-lo)" in md


EIGHT = {"tcp": [1.00, 1.10, 1.05], "tcp-ka": [0.60, 0.62, 0.61], "tcp-lo": [0.80, 0.85, 0.82],
         "tcp-lo-ka": [0.46, 0.45, 0.47], "uds": [0.55, 0.58, 0.56], "uds-ka": [0.45, 0.47, 0.46],
         "uds-lo": [0.55, 0.58, 0.56], "uds-lo-ka": [0.45, 0.47, 0.46]}


def test_answer_compares_paths_through_the_same_nginx():
    rep = build(p50_run(EIGHT, rate=500))
    text = rep["workloads"]["ping"]["answer"]
    assert "at 500 req/s" in text
    # tcp-lo - uds-lo = 250, 270, 260 µs: both through nginx-lo.
    assert ("With a new connection per request, the socket saved 260 µs (32% of tcp-lo's median) against TCP over "
            "loopback (`uds-lo` against `tcp-lo`: 95% CI 235 to 285 µs, 3 rounds)") in text
    # tcp - uds = 450, 520, 490 µs: both through nginx.
    assert "saved 487 µs (46% of tcp's median) against TCP across the Docker bridge (`uds` against `tcp`" in text
    # pooled: tcp-lo-ka - uds-lo-ka = +10, -20, +10 µs: neither excluding 0 nor inside ±2% (9 µs): not sure yet.
    assert ("With pooled keepalive connections, the socket is not told apart from TCP over loopback yet "
            "(`uds-lo-ka` against `tcp-lo-ka`: 95% CI -43 to 43 µs, 3 rounds, neither excluding 0 nor inside ±2%, "
            "9 µs): not sure yet; 3 usable rounds (2 degrees of freedom) are too few to say how much longer would "
            "decide") in text
    assert "the 4 comparisons are judged together (Holm's correction)" in text
    assert "Control held" in text and "control failed" not in text
    md = markdown.render_markdown(rep)
    answer = md[md.index("## The answer"):md.index("## Machine")]
    assert ("| new per request | TCP over loopback (`uds-lo` vs `tcp-lo`) | nginx-lo | 260 µs (32%) | 235 to 285 µs | "
            "**faster by 260 µs (32%)** |") in answer
    assert ("| pooled (keepalive) | TCP over loopback (`uds-lo-ka` vs `tcp-lo-ka`) | nginx-lo | — | -43 to 43 µs | "
            "not sure yet: 3 usable rounds (2 degrees of freedom) are too few to say how much longer would decide |") in answer
    # A control that held is not repeated; the method in one line, with its link.
    assert "Control held" not in answer and "[How to read this](#how-to-read-this)" in answer


def test_a_failed_control_is_said_next_to_the_answer():
    p50 = {**EIGHT, "uds-lo": [0.60, 0.64, 0.61]}  # nginx-lo 50-60 µs slower than nginx on the same socket
    text = build(p50_run(p50))["workloads"]["ping"]["answer"]
    assert "**the control failed**: nginx against nginx-lo, socket, new connections came out at -53 µs" in text


def test_an_aa_run_says_whether_the_path_differs_from_itself():
    same = build(p50_run({"uds": [0.50, 0.52, 0.49, 0.51], "uds-aa": [0.51, 0.50, 0.50, 0.52]}, rounds=4))
    text = same["workloads"]["ping"]["answer"]
    assert "no answer to give. Control held: A/A: the socket against itself, through nginx (calibration), " \
           "no measurable difference (95% CI" in text
    differs = build(p50_run({"uds": [0.50, 0.52, 0.49, 0.51], "uds-aa": [0.60, 0.62, 0.60, 0.61]}, rounds=4))
    assert "**the control failed**: A/A" in differs["workloads"]["ping"]["answer"]


def test_a_difference_holm_does_not_call_measurable_says_so_in_the_answer_and_the_table():
    """tcp-ka - uds-ka = 60, 130, 95, 40 µs: its own interval excludes 0 (p about 0.03),
    but not once the answer's four comparisons are judged together."""
    p50 = {k: v + [v[0]] for k, v in EIGHT.items()}
    p50["uds-ka"] = [0.54, 0.49, 0.515, 0.57]
    rep = build(p50_run(p50, rounds=4))
    d = rep["workloads"]["ping"]["breakdown"]["socket_bridge_pooled"]["figures"]["client_p50_ms"]
    assert d["p"] < 0.05 <= d["p_holm"] and not stats.measurable(d)
    assert ("is not told apart from TCP across the Docker bridge yet (`uds-ka` against `tcp-ka`: 95% CI 10 to 148 µs, "
            "4 rounds alone, neither excluding 0 nor inside ±2%, 12 µs): not sure yet") in rep["workloads"]["ping"]["answer"]
    assert "no measurable difference once the answer's comparisons are judged together (95% CI" in \
        markdown.render_markdown(rep)


def test_one_round_answer_gives_no_verdict():
    """ROUNDS=1: no interval, so neither a number called measurable nor "no
    measurable difference" (the old answer said "(500 to 500 µs over the rounds)")."""
    p50 = {k: v[:1] for k, v in EIGHT.items()}
    text = build(p50_run(p50, rounds=1))["workloads"]["ping"]["answer"]
    assert "no measurable difference" not in text and "over the rounds" not in text
    assert "differed by 250 µs against" in text and "in its 1 round: no interval, no verdict" in text


def test_answer_without_both_transports_says_so():
    rep = build(make_k6(paths=("tcp", "tcp-ka")))
    assert "no answer to give" in rep["workloads"]["ping"]["answer"]


def test_max_answer_is_throughput():
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p]))
    text = rep["workloads"]["ping"]["answer"]
    assert "uds carried 2.00x the requests/s of tcp" in text and "uds-ka carried 1.20x the requests/s of tcp-ka" in text
    # report.md: the answer as a table too, a row per comparison; rounds all equal give no interval, no verdict.
    md = markdown.render_markdown(rep)
    answer = md[md.index("## The answer"):md.index("## Machine")]
    assert "each path flat out (k6, 64 connections), requests/s:" in answer
    assert ("| new per request | TCP across the Docker bridge (`uds` vs `tcp`) | nginx | — | — | no verdict: 3 rounds, "
            "all equal, no interval |") in answer
    swing = iter([1.0, 1.03, 0.98] * 20)
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p] * next(swing)))
    answer = markdown.render_markdown(rep).split("## Machine")[0]
    assert re.search(r"\| new per request \| TCP across the Docker bridge \(`uds` vs `tcp`\) \| nginx \| [\d.]+x TCP's \| "
                     r"[\d.]+-[\d.]+x \| \*\*more requests/s: [\d.]+x TCP's\*\* \|", answer), answer


def test_max_mode_breaks_down_costs_not_queueing():
    """Flat out, client latency is the queue at the limit: the breakdown gives
    costs per request only, and says why."""
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p]))
    term = rep["workloads"]["ping"]["breakdown"]["tcp_connect"]
    assert "client_p50_ms" not in term["figures"] and "app_cpu_us_per_req" in term["figures"]
    md = markdown.render_markdown(rep)
    assert "client p50 latency (µs)" not in md and "mostly its queue at the limit" in md


def test_app_cpu_is_read_from_getrusage_where_the_app_has_it():
    """app_process_cpu_seconds_total (getrusage, µs) before process_cpu_seconds_total
    (10 ms clock ticks): only the ticks give a figure a resolution to respect."""
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    fine = build(k6, {"app_process_cpu_seconds_total": 0.0512, **server_table(k6)})
    ph = fine["phases"][0]
    assert ph["figures"]["app_cpu_us_per_req"] == pytest.approx(51.2) and ph["resolution"] == {}
    ticks = build(k6, {"app_process_cpu_seconds_total": None, **server_table(k6)})
    ph = ticks["phases"][0]
    # 0.05 s over the app's 1,000 requests; one 10 ms tick over them is 10 µs.
    assert ph["figures"]["app_cpu_us_per_req"] == pytest.approx(50) and ph["resolution"] == {
        "app_cpu_us_per_req": pytest.approx(10)}
    assert "app_cpu_us_per_req" not in ph["missing"]


def test_each_path_is_costed_on_its_own_nginx():
    lo = queries.server_queries("tcp-lo", 10, 1000.0)
    assert 'container_label_com_docker_compose_service="nginx-lo"' in lo["nginx_cpu_s"]
    assert 'container_label_com_docker_compose_service="nginx"' in queries.server_queries("tcp", 10, 1000.0)["nginx_cpu_s"]
    # nginx's requests per path come from its access log: both nginx log to it.
    assert 'nginx_location_requests_total{job="nginx-log",path="tcp-lo"}' in lo["nginx_requests"]


def test_breakdown_chart_draws_each_terms_mean_and_interval():
    wl = build(p50_run(EIGHT))["workloads"]["ping"]
    bars = {label: rest for label, *rest in charts.term_bars(wl, "client_p50_ms")}
    d = wl["breakdown"]["socket_new"]["figures"]["client_p50_ms"]
    assert bars[wl["breakdown"]["socket_new"]["label"]] == [d["mean"], d["lo"], d["hi"], True]
    # A negative difference stays negative; one that is not measurable is marked so.
    pooled = bars[wl["breakdown"]["socket_pooled"]["label"]]
    assert pooled[0] == pytest.approx(0) and pooled[3] is False
    assert len(bars) == len(wl["breakdown"])


# ---------------------------------------------------------------- sparse counters and missing figures


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


def test_sparse_counter_is_read_from_the_samples_around_the_window():
    # cAdvisor sampled 8 s apart: one sample inside the 10 s window. nginx's
    # container used 0.008 CPU-s per second: 80 µs for each of 1000 requests.
    k6 = make_k6(paths=("tcp", "uds"), rounds=2, duration=10)
    cpu = lambda t, start: 100 + 0.008 * (t - start)  # noqa: E731
    raw = lambda start, end: matrix([(t, cpu(t, start)) for t in (start - 6, start + 2, end + 4)])  # noqa: E731
    rep = build(k6, cadvisor_table(k6, raw))
    for ph in rep["phases"]:
        assert ph["figures"]["nginx_cpu_us_per_req"] == pytest.approx(80), ph["name"]
        assert ph["estimated"] == ["nginx_cpu_us_per_req", "generator_cpu_cores"]
        assert "nginx_cpu_us_per_req" not in ph["missing"]
    # An estimate is marked under its table, not warned about.
    assert "sparse_samples" not in kinds(rep) and "missing_figures" not in kinds(rep)
    md = markdown.render_markdown(rep)
    assert "| tcp |" in md and "| 80.0 |" in md
    assert "Estimates: nginx CPU/req in 4 of 4 phases" in md


def test_sparse_increase_handles_resets_several_series_and_gaps():
    # A reset (the container restarted) between the samples, and a second series.
    a = [(0, 10.0), (4, 12.0), (12, 1.0), (20, 5.0)]
    b = [(-5, 0.0), (15, 20.0)]
    inc, reason = queries.sparse_increase([a, b], 2, 12)
    # a: from 0 s to 12 s (the first sample at the end), 2 + 1 (after the reset,
    # the new value) over 12 s -> 2.5 over the 10 s window; b: 1/s -> 10.
    assert reason is None and inc == pytest.approx(2.5 + 10)
    # Only samples on one side of the window: too few.
    assert queries.sparse_increase([[(0, 1.0)], [(30, 2.0)]], 5, 15) == (None, "too few samples")
    assert queries.sparse_increase([], 5, 15) == (None, "no series")
    # One sample inside and one after: the rate between them.
    inc, _ = queries.sparse_increase([[(7, 1.0), (17, 3.0)]], 5, 15)
    assert inc == pytest.approx(2.0)


@pytest.mark.parametrize("up, raw, reason", [
    (0, lambda s, e: matrix(), "cAdvisor not running"),
    (None, lambda s, e: matrix(), "cAdvisor not running"),
    (1, lambda s, e: matrix(), "cAdvisor runs but labels no container"),
    (1, lambda s, e: matrix([(s + 3, 1.0)]), "too few cAdvisor samples"),
])
def test_missing_cadvisor_figure_says_why(up, raw, reason):
    k6 = make_k6(paths=("tcp", "uds"), rounds=2, duration=10)
    rep = build(k6, cadvisor_table(k6, raw, up=up))
    for ph in rep["phases"]:
        assert ph["figures"]["nginx_cpu_us_per_req"] is None
        assert reason in ph["missing"]["nginx_cpu_us_per_req"], ph["missing"]
        assert ph["figures"]["app_cpu_us_per_req"] == pytest.approx(50)  # the rest is there
    missing = [w for w in rep["warnings"] if w["kind"] == "missing_figures"]
    assert any("nginx CPU/req" in w["message"] and reason in w["message"] for w in missing), missing
    md = markdown.render_markdown(rep)
    assert f"n/a ({reason}" in md
    assert "cAdvisor not running" not in md or reason == "cAdvisor not running"


def test_missing_node_exporter_is_named():
    k6 = make_k6(paths=("tcp", "uds"), rounds=2, duration=10)
    table = server_table(k6, {"node_context_switches_total": None, 'up{job="node"}': 0})
    rep = build(k6, table)
    assert "node-exporter not running" in rep["phases"][0]["missing"]["host_ctx_switches_per_req"]
    assert any("host ctx switches/req" in w["message"] for w in rep["warnings"] if w["kind"] == "missing_figures")
    assert "node-exporter not running" in rep["idle_baseline"]["missing"]


def test_a_missing_collector_on_a_cluster_names_the_charts_value():
    """On Kubernetes (cluster.json) a missing cAdvisor or node-exporter is the
    chart's value to turn on, not compose's make up; compose's wording stays."""
    k6 = make_k6(paths=("tcp", "uds"), rounds=2, duration=10)
    table = server_table(k6, {"node_context_switches_total": None, 'up{job="node"}': 0,
                              'up{job="cadvisor"}': 0})
    for gen in ("nginx", "k6"):
        table[("container_cpu_usage_seconds_total", f'service="{gen}"')] = None
    q = fake_query(table)
    k8s = context.build_report(k6, None, q, "http://prom:9090", cluster=CLUSTER)
    missing = k8s["phases"][0]["missing"]
    assert "cAdvisor not running (the chart's value costs.cadvisor=true turns it on" in missing["nginx_cpu_us_per_req"]
    assert "costs.cadvisor=true" in missing["generator_cpu_cores"]
    assert "node-exporter not running (the chart's value costs.nodeExporter=true turns it on, in a namespace " \
           "labelled pod-security.kubernetes.io/enforce=privileged" in missing["host_ctx_switches_per_req"]
    assert "costs.nodeExporter=true" in k8s["idle_baseline"]["missing"]
    assert not any("make up" in v for p in k8s["phases"] for v in p["missing"].values())
    md = markdown.render_markdown({**k8s, "cluster": CLUSTER})
    assert "costs.cadvisor=true" in md and "make up leaves it out" not in md
    compose = context.build_report(k6, COMPOSE, q, "http://prom:9090")
    assert "cAdvisor not running (make up leaves it out" in compose["phases"][0]["missing"]["nginx_cpu_us_per_req"]
    assert "costs." not in json.dumps(compose["phases"])


def test_cadvisor_without_this_releases_containers_on_a_cluster():
    k6 = make_k6(paths=("tcp", "uds"), rounds=2, duration=10)
    rep = context.build_report(k6, None, fake_query(cadvisor_table(k6, lambda s, e: matrix(), up=1)),
                               "http://prom:9090", cluster=CLUSTER)
    why = rep["phases"][0]["missing"]["nginx_cpu_us_per_req"]
    assert "no series of this release's containers" in why and "google/cadvisor#3772" not in why


def test_an_app_without_metrics_is_named_not_down():
    # A stack that exports no metrics (issue 12): up{job="app"} is 0, and its
    # figures are n/a for that reason, not "not running"; nginx's and k6's stay.
    k6 = make_k6(paths=("tcp", "uds"), rounds=2, duration=10)
    over = {k: None for k in ("histogram_quantile(0.5,", "histogram_quantile(0.99,", "app_http_requests_total",
                              "process_cpu_seconds_total", "app_process_context_switches_total")}
    rep = build(k6, server_table(k6, {**over, 'up{job="app"}': 0}))
    for key in ("app_p50_ms", "app_requests", "app_cpu_us_per_req", "app_ctx_switches_per_req"):
        assert "no metrics from the app" in rep["phases"][0]["missing"][key], rep["phases"][0]["missing"]
    assert "its container's CPU: cAdvisor not running" in rep["phases"][0]["missing"]["app_cpu_us_per_req"]
    assert not any("app not running" in v for k, v in rep["phases"][0]["missing"].items() if k.startswith("app_"))
    assert rep["phases"][0]["figures"]["client_p50_ms"] is not None
    # Where cAdvisor runs, app CPU per request comes from the app's container,
    # per request the generator completed.
    rep = build(k6, server_table(k6, {**over, 'up{job="app"}': 0,
                                      ("container_cpu_usage_seconds_total", 'service="app"'): 0.07}))
    for ph in rep["phases"]:
        assert ph["figures"]["app_cpu_us_per_req"] == pytest.approx(0.07e6 / ph["figures"]["requests"])


# ---------------------------------------------------------------- context switches

BACKGROUND = 20_000  # the host's switches per second, idle and under load (Prometheus, Docker, k6)
HOST_PER_REQ = {"tcp": 6.0, "uds": 3.0, "tcp-ka": 4.0}  # what each path adds to the host, per request
APP_PER_REQ = {"tcp": 2.0, "uds": 1.0, "tcp-ka": 1.5}  # the app process's own, per request


def background_table(k6, idle_at=(2.5, 7.5), swing=0.005):
    """A host whose background is large and constant (BACKGROUND/s in the idle
    phase, within +-swing of it in the phases, by round) and paths that add a
    known few switches per request, to the host and to the app."""
    rate, duration = k6["settings"]["rate"], k6["settings"]["duration"]

    def host(path, r):
        return BACKGROUND * (1 + swing * (-1) ** r) * duration + HOST_PER_REQ[path] * rate * duration

    return server_table(k6, {
        "node_context_switches_total": host_switches(k6, by_phase(k6, host), BACKGROUND, idle_at),
        "app_process_context_switches_total": by_phase(k6, lambda path, r: APP_PER_REQ[path] * rate * duration),
    })


def test_context_switches_describe_the_path_not_the_hosts_background():
    k6 = make_k6(paths=("tcp", "uds", "tcp-ka"), rounds=3, rate=500, duration=20)
    table = background_table(k6)
    q = fake_query(table)
    rep = context.build_report(k6, COMPOSE, q)
    assert rep["idle_baseline"]["host_ctx_switches_per_s"] == pytest.approx(BACKGROUND)
    assert rep["idle_baseline"]["samples"] == 2 and rep["idle_baseline"]["missing"] is None
    planned = {p["name"]: p for p in k6["phases"]}
    for ph in rep["phases"]:
        f, path = ph["figures"], ph["path"]
        # The old figure, the host's switches / requests: the background's 40 per
        # request drowns the path's few.
        raw, _, _ = queries.server_values(q, planned[ph["name"]], queries.phase_window(k6, planned[ph["name"]]))
        old = raw["ctx_switches"] / f["requests"]
        assert old > 5 * HOST_PER_REQ[path], (ph["name"], old)
        # Above idle: the path's own within the background's swing (0.5% of 40/req).
        assert f["host_ctx_switches_per_req"] == pytest.approx(HOST_PER_REQ[path], abs=0.25), ph["name"]
        # The app's own, read from its metric.
        assert f["app_ctx_switches_per_req"] == pytest.approx(APP_PER_REQ[path]), ph["name"]
    assert any("app_process_context_switches_total{job=\"app\"}" in c for c in q.calls)
    uds = rep["workloads"]["ping"]["paths"]["uds"]["ratio_to_tcp"]
    old_ratio = (BACKGROUND * 20 + HOST_PER_REQ["uds"] * 10_000) / (BACKGROUND * 20 + HOST_PER_REQ["tcp"] * 10_000)
    assert old_ratio > 0.9  # the old figure: nearly the same on both paths
    assert uds["host_ctx_switches_per_req"]["mean"] == pytest.approx(0.5, abs=0.05)
    assert uds["app_ctx_switches_per_req"]["mean"] == pytest.approx(0.5)
    # The app's figure is a headline figure and a breakdown term.
    assert "app_ctx_switches_per_req" in rep["headline"] and "host_ctx_switches_per_req" not in rep["headline"]
    md = markdown.render_markdown(rep)
    assert "Idle baseline: the host made 20,000 context switches/s with no requests" in md
    assert "host above idle" in md
    # Where the time goes: a new connection costs the app 2.0 - 1.5 switches per request.
    term = rep["workloads"]["ping"]["breakdown"]["tcp_connect"]["figures"]["app_ctx_switches_per_req"]
    assert term["mean"] == pytest.approx(0.5)
    assert "| app context switches per request | nginx CPU per request (µs) |" in md
    assert "| 0.5 (3 rounds, all equal: no interval, no verdict) |" in md


TOO_FEW = "the idle phase (10 s) held 1 node-exporter sample(s), two are needed: set IDLE >= 10"


@pytest.mark.parametrize("at, why", [
    ((2.5, 7.5), None),
    ((0.1, 9.9), None),
    ((2.5,), TOO_FEW),
    ((), "in the idle phase: no series from node-exporter"),
])
def test_idle_baseline_needs_two_samples(at, why):
    """Two node-exporter samples inside the idle phase give its rate; one gives
    n/a, saying why, never a figure from nothing."""
    ok = why is None
    k6 = make_k6(paths=("tcp", "uds"), rounds=2, rate=500, duration=20)
    table = background_table(k6, idle_at=at)
    table['up{job="node"}'] = 1
    rep = build(k6, table)
    b = rep["idle_baseline"]
    assert (b["host_ctx_switches_per_s"] is not None) == ok
    for ph in rep["phases"]:
        assert (ph["figures"]["host_ctx_switches_per_req"] is not None) == ok
        assert ph["figures"]["app_ctx_switches_per_req"] is not None  # the app's needs no baseline
    if ok:
        assert b["host_ctx_switches_per_s"] == pytest.approx(BACKGROUND)
        tcp = next(ph for ph in rep["phases"] if ph["path"] == "tcp")
        assert tcp["figures"]["host_ctx_switches_per_req"] == pytest.approx(HOST_PER_REQ["tcp"], abs=0.25)
    else:
        assert why in b["missing"] and why in rep["phases"][0]["missing"]["host_ctx_switches_per_req"]
        warned = [w for w in rep["warnings"] if w["kind"] == "missing_figures" and "host ctx switches" in w["message"]]
        assert len(warned) == 1 and why in warned[0]["message"] and len(warned[0]["phases"]) == 4
        assert f"Idle baseline: n/a ({why}" in markdown.render_markdown(rep)


@pytest.mark.parametrize("change, why", [
    (lambda k6: (k6.pop("idle"), k6["settings"].pop("idle")), "load.json has no idle phase (a run from before IDLE)"),
    (lambda k6: k6.update(idle=None), "the run had no idle phase (IDLE=0)"),
])
def test_no_idle_phase_says_why_the_hosts_figure_is_missing(change, why):
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    change(k6)
    import jsonschema

    jsonschema.validate(k6, json.loads(cli.LOAD_SCHEMA.read_text()))  # an old load.json is still read
    rep = build(k6)
    for ph in rep["phases"]:
        assert ph["figures"]["host_ctx_switches_per_req"] is None
        assert why in ph["missing"]["host_ctx_switches_per_req"]
        assert ph["figures"]["app_ctx_switches_per_req"] == pytest.approx(2.5)
    assert any(why in w["message"] for w in rep["warnings"] if w["kind"] == "missing_figures")
    assert f"n/a ({why}" in markdown.render_markdown(rep)


def test_app_without_its_switches_metric_leaves_only_that_figure_empty():
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    rep = build(k6, server_table(k6, {"app_process_context_switches_total": None, 'up{job="app"}': 1}))
    for ph in rep["phases"]:
        assert ph["figures"]["app_ctx_switches_per_req"] is None
        assert "the app" in ph["missing"]["app_ctx_switches_per_req"]
        assert ph["figures"]["app_cpu_us_per_req"] == pytest.approx(50)


# ---------------------------------------------------------------- load.json's shape


def test_fake_load_json_has_the_schemas_shape():
    """The fake above is what the generators write (loadgen/test_k6.py and
    test_wrk_runner.py hold them to the same schema)."""
    import jsonschema

    schema = json.loads(cli.LOAD_SCHEMA.read_text())
    jsonschema.validate(make_k6(workloads=("ping", "cpu")), schema)
    k6 = make_k6()
    k6["settings"].update({"mode": "max", "generator": "wrk", "threads": 1})
    del k6["settings"]["rate"]
    jsonschema.validate(k6, schema)


@pytest.mark.parametrize("change, where, what", [
    (lambda k6: k6["phases"][0].update(requests="100"), "at phases/0/requests", "is not of type 'integer'"),
    (lambda k6: k6.pop("phases"), "at the top level", "'phases' is a required property"),
    (lambda k6: k6.update(base_url="http://nginx:8080"), "at the top level", "'base_url' was unexpected"),
    (lambda k6: k6["settings"].update(generator="ab"), "at settings/generator", "'ab' is not one of"),
])
def test_load_json_of_another_shape_exits_2(tmp_path, change, where, what):
    k6 = make_k6()
    change(k6)
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "load.json").write_text(json.dumps(k6))
    res = run_script("--run", "t1", "--prometheus", "http://127.0.0.1:1", "--results", str(tmp_path))
    assert res.returncode == 2, res.stdout
    assert f"{tmp_path / 't1' / 'load.json'} does not match load.schema.json" in res.stderr
    assert where in res.stderr and what in res.stderr, res.stderr
    assert not (tmp_path / "t1" / "report.md").exists()


def test_readme_lists_every_warning():
    """report/README.md's table names every kind of warning the code raises."""
    code = "".join(p.read_text() for p in (ROOT / "report").glob("*.py") if not p.name.startswith("test_"))
    raised = set(re.findall(r'warning\(\s*"([a-z_0-9]+)"', code)) | set(re.findall(r'\(\s*"([a-z_]+)", (?:lambda|error_reasons)', code))
    readme = (ROOT / "report" / "README.md").read_text()
    assert {"saturated", "errors", "short_phase", "same_ceiling", "generator_cpu_unknown"} <= raised
    assert [k for k in sorted(raised) if f"`{k}`" not in readme] == []


def test_the_precision_line_says_met_not_met_or_nothing_to_narrow():
    from report.markdown_answer import precision_line
    c = [{"workload": "ping", "term": "socket_new", "pair": "uds-lo against tcp-lo", "rounds": 20, "half_width": 0.031},
         {"workload": "ping", "term": "socket_pooled", "pair": "uds-lo-ka against tcp-lo-ka", "rounds": 20,
          "half_width": 0.072}]
    p = {"target_pct": 5.0, "met": False, "rounds": 20, "max_rounds": 20, "comparisons": c}
    assert precision_line(p) == ("Precision: **not met**: the target was +/-5%; after 20 rounds (MAX_ROUNDS) the widest "
                                 "comparison is +/-7.2% (uds-lo-ka against tcp-lo-ka, `ping`). More rounds, or a "
                                 "quieter machine, narrow it.")
    assert precision_line({**p, "met": True, "comparisons": c[:1], "max_rounds": 48}) == (
        "Precision: every comparison of the answer reached +/-5% of its first path's figure after 20 rounds "
        "(PRECISION; at most 48).")
    assert "no comparison of the answer to narrow" in precision_line({**p, "comparisons": []})
    assert precision_line(None) is None


# ---------------------------------------------------------------- server cores by mode


def test_server_cores_are_nginx_and_the_apps_when_both_are_pinned_apart_from_the_generator():
    lim = lambda nginx, app, gen="": {"nginx": {"cpuset": nginx}, "app": {"cpuset": app}, "k6": {"cpuset": gen}}  # noqa: E731
    assert queries.server_cores(lim("0", "1-2", "3")) == ([0, 1, 2], None)
    assert queries.server_cores(lim("0", "0")) == ([0], None)
    assert queries.server_cores(lim("0", "")) == (None, queries.UNPINNED)
    cores, why = queries.server_cores(lim("0,1", "1", "1"))
    assert cores is None and "the load generator shares the server cores (LOADGEN_CPUSET)" in why
    # Every generator of catalogue.json's list, oha too (it once went unwarned).
    for gen in ("wrk", "oha"):
        cores, why = queries.server_cores({"nginx": {"cpuset": "0"}, "app": {"cpuset": "0"}, gen: {"cpuset": "0"}})
        assert cores is None and "shares the server cores" in why, gen


def test_the_cores_time_by_mode_per_request_with_its_resolution():
    pinned = {"services": {**COMPOSE["services"], "app": {**COMPOSE["services"]["app"], "cpuset": "1"},
                           "k6": {**COMPOSE["services"]["k6"], "cpuset": "2,3"}}}
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2, duration=10)  # 1000 requests a phase
    modes = {("node_cpu_seconds_total", 'cpu=~"0|1"', f'mode="{m}"'): v
             for m, v in (("user", 0.05), ("system", 0.03), ("softirq", 0.02), ("irq", None))}
    rep = build(k6, server_table(k6, modes), pinned)
    assert rep["server_cores"] == {"cores": [0, 1], "missing": None}
    ph = rep["phases"][0]
    assert ph["figures"]["core_user_us_per_req"] == pytest.approx(50)
    assert ph["figures"]["core_softirq_us_per_req"] == pytest.approx(20)
    assert ph["figures"]["core_irq_us_per_req"] is None and "core_irq_us_per_req" in ph["missing"]
    # 0.03 s is 3 ticks of 10 ms, each a sample: uncertain by sqrt(3) ticks, over 1000 requests.
    assert ph["resolution"]["core_system_us_per_req"] == pytest.approx(10 * 3 ** 0.5)
    assert ph["resolution"]["core_user_us_per_req"] == pytest.approx(10 * 5 ** 0.5)
    md = markdown.render_markdown(rep)
    assert "The server cores' time by mode (cores 0,1:" in md
    assert "| tcp-lo | 50.0 | 30.0 | 20.0 | n/a" in md
    assert "server cores' softirq per request (µs)" in md  # a breakdown column, pinned


def test_unpinned_cores_say_why_once_and_raise_no_warning():
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2)
    rep = build(k6)
    assert rep["server_cores"]["missing"] == queries.UNPINNED
    md = markdown.render_markdown(rep)
    assert f"The server cores' time by mode is not given: {queries.UNPINNED}." in md
    assert "server cores" not in " ".join(w["message"] for w in rep["warnings"])
    assert "softirq per request" not in md  # no breakdown column of n/a


def test_conntrack_entries_fill_and_a_table_near_full():
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2, duration=10)
    table = server_table(k6, {"app_netns_conntrack_entries_limit": 1000, "app_netns_conntrack_entries{": 850,
                              "app_netns_conntrack_drops_total": 0})
    rep = build(k6, table)
    ph = rep["phases"][0]
    assert (ph["figures"]["conntrack_entries"], ph["figures"]["conntrack_drops"]) == (850, 0)
    assert ph["figures"]["conntrack_fill"] == pytest.approx(0.85)
    md = markdown.render_markdown(rep)
    assert "Entries at the end of a phase, at most: tcp-lo 850, uds-lo 850; the table at most 85% full; 0 connections" in md
    (w,) = [w for w in rep["warnings"] if w["kind"] == "conntrack_full"]
    assert "reached 85% of its limit" in w["message"] and len(w["phases"]) == 4


def test_no_conntrack_series_is_neither_a_line_nor_a_warning():
    rep = build(make_k6(paths=("tcp-lo", "uds-lo"), rounds=2))
    assert "Connection tracking" not in markdown.render_markdown(rep)
    assert not [w for w in rep["warnings"] if "conntrack" in w["message"]]


def test_max_answer_says_when_holm_takes_a_ratio_back():
    """Two ratios whose intervals exclude 1 alone (p about 0.03 each) but not
    once judged together: the answer must not print "no measurable difference"
    beside an interval that excludes 1 without saying why."""
    ratios = [1.30, 1.05, 1.25, 1.02, 1.22]
    phases = [{"workload": "ping", "path": p, "round": r, "figures": {"rps": 1000.0 * (x if p.startswith("uds") else 1)}}
              for r, x in enumerate(ratios, 1) for p in ("tcp-lo", "uds-lo", "tcp-lo-ka", "uds-lo-ka")]
    text = words.max_answer("ping", phases, {"mode": "max", "generator": "wrk", "connections": 64})
    assert text.count("no measurable difference once the comparisons are judged together (95% CI 1.02-1.33x, 5 rounds alone)") == 2, text


def test_a_warning_names_a_few_phases_not_all_of_them():
    assert markdown.phases_named([], 10) == ""
    assert markdown.phases_named(["a", "b"], 10) == " Phases: a, b."
    assert markdown.phases_named([f"p{i}" for i in range(14)], 14) == " Phases: all 14."
    assert markdown.phases_named([f"p{i}" for i in range(9)], 14) == " Phases: p0, p1, p2 and 6 more (report.json lists them)."


def test_an_app_figure_missing_in_every_round_says_why_in_its_cell():
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    rep = build(k6, server_table(k6, {"histogram_quantile(0.5,": None, "histogram_quantile(0.99,": None}))
    row = next(l for l in markdown.render_markdown(rep).splitlines() if l.startswith("| tcp | "))
    assert row.count("n/a (") >= 2 and "| n/a |" not in row.replace("n/a (cAdvisor", "x"), row


def test_images_are_of_the_services_the_run_used():
    services = {n: {"image": f"img/{n}"} for n in ("app", "nginx", "k6", "wrk", "cadvisor", "node-exporter", "floor",
                                                   "floor-near", "prometheus")}
    got = context.compose_info({"services": services}, "wrk", {"cadvisor": False, "node-exporter": True})["images"]
    assert sorted(got) == ["app", "nginx", "node-exporter", "prometheus", "wrk"]
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    assert context.ran(k6, fake_query({'up{job="cadvisor"}': 0, 'up{job="node"}': 1})) == {
        "cadvisor": False, "node-exporter": True}


def test_a_stack_that_closes_every_connection_is_not_credited_with_pooling():
    """gunicorn's sync workers close every connection (catalogue.json: pools
    false): its -ka paths opened one per request, and the answer says so
    instead of "with pooled keepalive connections" (issue 22)."""
    gunicorn = {"services": {**COMPOSE["services"],
                             "app": {**COMPOSE["services"]["app"], "image": "uds-lab/stack-gunicorn:local",
                                     "labels": {"uds-lab.stack": "gunicorn"}}}}
    rep = build(p50_run(EIGHT, rate=500), compose=gunicorn)
    text = rep["workloads"]["ping"]["answer"]
    assert rep["stack"] == "gunicorn"
    assert "pooled keepalive" not in text, text
    assert ("On the keepalive (-ka) paths, which did not reuse connections here (gunicorn closes every connection, "
            "as its stack.env says), the socket is not told apart from TCP over loopback yet") in text
    (w,) = [w for w in rep["warnings"] if w["kind"] == "not_pooled"]
    assert w["workload"] == "ping" and "not of pooling" in w["message"]
    assert "not_pooled" not in kinds(build(p50_run(EIGHT, rate=500)))  # the lab's own app pools
    # gunicorn's gthread workers keep connections (catalogue.json: pools_with).
    gunicorn["services"]["app"]["environment"] = {"GUNICORN_WORKER_CLASS": "gthread"}
    rep = build(p50_run(EIGHT, rate=500), compose=gunicorn)
    assert "With pooled keepalive connections" in rep["workloads"]["ping"]["answer"]


def test_pooled_paths_that_opened_a_connection_per_request_are_named_from_the_apps_accepts():
    """An app the catalogue does not know: its accept counter on the -ka
    paths (one per request, as on the new-connection paths) says it did not pool."""
    mine = {"services": {**COMPOSE["services"], "app": {**COMPOSE["services"]["app"], "image": "me/app:1"}}}
    k6 = p50_run(EIGHT, rate=500, duration=10)
    closes = server_table(k6, {"app_connections_accepted_total": 1000})  # 1000 requests a phase
    rep = build(k6, closes, mine)
    assert rep["stack"] is None
    assert rep["phases"][0]["figures"]["app_conns_per_req"] == pytest.approx(1.0)
    text = rep["workloads"]["ping"]["answer"]
    assert "the app accepted 1.00 new connections per request on tcp-lo-ka; the app accepted 1.00 new connections " \
           "per request on uds-lo-ka" in text and "pooled keepalive" not in text
    # Pooling: a few connections over a phase's 1000 requests.
    pooling = server_table(k6, {"app_connections_accepted_total": by_phase(k6, lambda p, r: 3 if "-ka" in p else 1000)})
    rep = build(k6, pooling, mine)
    assert "With pooled keepalive connections, the socket" in rep["workloads"]["ping"]["answer"]
    assert "not_pooled" not in kinds(rep)
    # Flat out, the ratios of the -ka pairs are said to be of new connections.
    rep = build(max_k6(lambda p: 1000.0, duration=10), closes, mine)
    assert "which did not reuse connections here" in rep["workloads"]["ping"]["answer"]


def test_the_stack_that_ran_is_make_ups_label_and_its_facts_its_stack_env(tmp_path):
    from report import lab
    assert lab.stack_of("node", "uds-lab-standin/stack-node:1") == "node"  # make up STACK=node, a stand-in image
    assert lab.stack_of("", None) == lab.stack_of("", "uds-lab/app:local") == lab.stack_of("", "uds-lab/app:e2e-apps") == "go"
    assert lab.stack_of("", "uds-lab/apps:local") is None
    assert lab.stack_of("", "me/app:1") is None  # an app the lab does not ship
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "stack.env").write_text(
        "# a comment\nSTACK_ABOUT=my stack, closes connections # a note\nSTACK_LACKS=cpu,sleep\nSTACK_POOLS=false\n"
        "STACK_POOLS_WITH=MY_MODE=keep\nAPP_IMAGE=me/stack:1\nAPP_PROTOCOL=fastcgi\n")
    s = lab.read_stacks(tmp_path)
    assert s["mine"] == {"dir": "stacks/mine", "about": "my stack, closes connections", "protocol": "fastcgi",
                         "lacks": ["cpu", "sleep"], "pools": False, "pools_with": {"MY_MODE": "keep"},
                         "image": "me/stack:1"}
    assert s["go"]["pools"] and list(s) == ["go", "mine"]
    # The repository's own folders, each a stack.
    assert set(lab.STACKS) == {"go"} | {f.parent.name for f in (lab.ROOT / "stacks").glob("*/stack.env")} >= {
        "go", "php-fpm", "gunicorn", "node"}
    assert not lab.pools("gunicorn") and lab.pools("gunicorn", {"GUNICORN_WORKER_CLASS": "gthread"}.get)


def test_straight_to_the_app_is_set_beside_the_same_pair_through_nginx():
    """make max GENERATOR=oha with the direct paths: the socket's ratio
    straight to the app, the same pair through nginx-lo, the share of the
    direct gain that survives nginx, seed 000's figure beside them."""
    rps = {"direct-tcp": 10000, "direct-uds": 20000, "tcp-lo-ka": 6000, "uds-lo-ka": 7500, "tcp-lo": 3000,
           "uds-lo": 4500}
    k6 = max_k6(lambda p: rps[p], paths=tuple(rps))
    for ph in k6["phases"]:  # a little spread over rounds on the socket paths, so that intervals exist
        if ph["path"] in ("direct-uds", "uds-lo-ka", "uds-lo"):
            ph["requests"] = int(ph["requests"] * (1 + 0.01 * ph["round"]))
    k6["settings"]["generator"] = "oha"
    rep = build(k6)
    d = rep["direct"]["ping"]
    assert d["ratio"]["mean"] == pytest.approx(2.0, rel=0.02)
    pooled = next(b for b in d["beside"] if b["term"] == "socket_pooled")
    assert pooled["ratio"]["mean"] == pytest.approx(1.25, rel=0.02) and pooled["survives"] == pytest.approx(0.25, abs=0.03)
    direct_phase = next(p for p in rep["phases"] if p["path"] == "direct-uds")
    assert direct_phase["missing"]["nginx_connect_ms"] == queries.NO_NGINX  # said in its cell, not warned
    assert not [w for w in rep["warnings"] if queries.NO_NGINX in w["message"]]
    md = markdown.render_markdown(rep)
    assert "## Straight to the app" in md
    assert "- `ping`: straight to the app, `direct-uds` carried 2.0" in md and "the requests/s of `direct-tcp`" in md
    assert "pooled (`uds-lo-ka` against `tcp-lo-ka`) 1.2" in md and "of the direct gain survives" in md
    assert "seed 000 (Gin, wrk, no nginx, its own machine): 3.0x" in md
    assert "Straight to the app" not in markdown.render_markdown(build(max_k6(lambda p: 1000.0 * (2 if "uds" in p else 1))))
    same = {**rps, "direct-uds": 10000}  # no difference straight to the app: said so, not "carried"
    k6 = max_k6(lambda p: same[p], paths=tuple(same))
    for ph in k6["phases"]:
        if ph["path"] in ("direct-uds", "uds-lo-ka", "uds-lo"):
            ph["requests"] = int(ph["requests"] * (1 + (0.02 if ph["round"] % 2 else -0.02)))
    k6["settings"]["generator"] = "oha"
    assert "straight to the app, `direct-uds` against `direct-tcp`: no measurable difference (95% CI" in \
        markdown.render_markdown(build(k6))


def test_the_report_says_whether_loopback_was_tracked():
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2)
    assert "Loopback in the app's network namespace: tracked, as Docker sets it up" in markdown.render_markdown(build(k6))
    off = {"services": {**COMPOSE["services"],
                        "app": {**COMPOSE["services"]["app"], "labels": {"uds-lab.lo-notrack": "1"}}}}
    rep = build(k6, compose=off)
    assert rep["compose"]["lo_notrack"] == "1"
    assert "not tracked (APP_LO_NOTRACK=1" in markdown.render_markdown(rep)


def test_a_ratio_left_out_for_a_negative_round_is_said_in_its_cell():
    """The host's switches above idle came out below 0 in one round of uds:
    that round has no ratio, and the cell says one was left out."""
    k6 = make_k6(paths=("tcp", "uds"), rounds=3)
    host = host_switches(k6, by_phase(k6, lambda path, r: 500 if (path, r) == ("uds", 2) else 4000 + 37 * r * (path == "uds")))
    rep = build(k6, server_table(k6, {"node_context_switches_total": host}))
    r = rep["workloads"]["ping"]["paths"]["uds"]["ratio_to_tcp"]["host_ctx_switches_per_req"]
    assert r["rounds"] == 2 and r["dropped"] == 1
    assert "; 1 round left out)" in markdown.render_markdown(rep)


def test_the_socket_costing_more_is_said_as_a_cost():
    """A negative saving (the socket slower) is judged as a positive one and worded as a cost."""
    p50 = {**EIGHT, "uds-lo": [0.85, 0.905, 0.87]}  # 50, 55, 50 µs slower than tcp-lo
    text = build(p50_run(p50))["workloads"]["ping"]["answer"]
    assert "the socket cost 52 µs (6% of tcp-lo's median) against TCP over loopback" in text


def test_a_precision_runs_answer_takes_its_spread_from_the_first_stage():
    """PRECISION: the first 3 rounds set how many the run took; the answer's
    intervals are Stein's (their spread), and the report says so."""
    p50 = {k: v + v for k, v in EIGHT.items()}  # 6 rounds: the first stage's 3, then 3 more
    k6 = p50_run(p50, rounds=6)
    k6["precision"] = {"target_pct": 5.0, "met": True, "rounds": 6, "max_rounds": 12, "first_stage_rounds": 3,
                       "comparisons": [{"workload": "ping", "term": "socket_new", "pair": "uds-lo against tcp-lo",
                                        "rounds": 6, "half_width": 0.04}]}
    rep = build(k6)
    d = rep["workloads"]["ping"]["breakdown"]["socket_new"]["figures"]["client_p50_ms"]
    assert d["first_stage"] == 3 and "Stein" in d["method"]
    assert "Stein's two-stage procedure: the first 3 rounds' spread set how many" in markdown.render_markdown(rep)


def test_a_pooled_socket_measurably_slower_points_to_what_the_test_bed_found():
    """The answer's pooled pair with the socket slower, by a clear margin in
    every round: the answer says what was behind it on the test bed, labelled
    as the test bed's, and where this run's switches are; not otherwise."""
    slower = {**EIGHT, "tcp-lo-ka": [0.46, 0.45, 0.47], "uds-lo-ka": [0.56, 0.555, 0.57]}
    text = build(p50_run(slower, rate=500))["workloads"]["ping"]["answer"]
    assert "the socket cost 102 µs" in text and "Where the pooled socket is slower at a fixed rate: on the test bed" in text
    assert "Where the pooled socket" not in build(p50_run(EIGHT, rate=500))["workloads"]["ping"]["answer"]


def test_comparisons_whose_rounds_were_not_back_to_back_are_named():
    """plan.py runs the answer's pairs back to back, each path once a round:
    a term across two pairs (a connection's setup, tcp against tcp-ka) pairs
    phases up to a round apart, and the report says which."""
    rep = build(make_k6(rounds=4, paired=True))
    wl = rep["workloads"]["ping"]
    by_paths = {(t["minuend"], t["subtrahend"]): t for t in wl["breakdown"].values()}
    assert by_paths[("tcp", "uds")]["back_to_back"] is True
    assert by_paths[("tcp", "tcp-ka")]["back_to_back"] is False
    assert wl["back_to_back_with_tcp"] == ["uds"]
    md = markdown.render_markdown(rep)
    assert "Back to back with tcp in every round: `uds`; every other path's round pairs with tcp's further apart" in md
    named = next(line for line in md.splitlines() if line.startswith("Back to back in every round: the answer's pairs"))
    assert by_paths[("tcp", "tcp-ka")]["label"] in named and by_paths[("tcp", "uds")]["label"] not in named


@pytest.mark.parametrize("placement, says", [
    ({"app": ["n1"], "nginx": ["n1"], "openloop": ["n1"]},
     "Placement: nginx and the app on one node (`n1`): the `tcp` path crosses the pod network inside that node, "
     "not a wire between nodes; the generator on `n1` (beside the app: its CPU is taken from the app's node)"),
    ({"app": ["n1"], "nginx": ["n2"], "openloop": ["n3", "n4"], "prometheus": ["n3"]},
     "Placement: nginx and the app on different nodes (nginx on `n2`, the app on `n1`): the `tcp` path crosses "
     "the network between them; the generator on `n3`, `n4`"),
    ({"app": ["n1"], "nginx": ["n2"], "openloop": ["n1", "n2"]},
     "nginx and the app on different nodes (nginx on `n2`, the app on `n1`): the `tcp` path crosses the network "
     "between them; the generator on `n1`, `n2` (beside the app"),
    ({"app": ["n1"]}, "Placement: n/a (cluster.json names no node of the app's pod or nginx's)"),
])
def test_a_kubernetes_run_says_whether_tcp_crossed_nodes(placement, says):
    """cluster.json's placement (scripts/k8s.sh: each pod's node by
    component): the report's where-it-ran lines say whether the nginx of the
    tcp path ran on the app's node, and where the generator ran."""
    md = "\n".join(markdown.cluster_lines({**CLUSTER, "placement": placement}, None))
    assert says in md
    # A cluster.json from before the placement was recorded: no line.
    old = {k: v for k, v in CLUSTER.items() if k != "placement"}
    assert "Placement" not in "\n".join(markdown.cluster_lines(old, None))
