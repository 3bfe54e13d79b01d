"""Context switches per request: the host's above its idle baseline (against
a host with 20,000 switches/s of background), the app's own from its
metric, and the baseline n/a, saying why, where the idle phase held too few
samples or there was none."""
import json

import pytest

from report import cli, context, markdown, queries
from report.testkit import COMPOSE, build, by_phase, fake_query, host_switches, make_k6, server_table


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
