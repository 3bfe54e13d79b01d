"""The report's warnings (report/warnings.py) at their thresholds: each one
is stated as "above" or "at or above" in the report's "How to read this",
and a figure exactly at it falls on the side stated."""
import pytest

from report import warnings as w

SETTINGS = {"mode": "max", "rounds": 4, "generator": "wrk"}


@pytest.mark.parametrize("share, warned", [(None, False), (0.05, False), (0.0501, True)])
def test_late_requests_warn_above_5_percent(share, warned):
    assert bool(w.late_reason(share)) == warned
    assert bool(w.saturation_reasons({"late_rate": share}, None, None)) == warned


@pytest.mark.parametrize("dropped, warned", [(1, False), (2, True)])
def test_dropped_requests_warn_above_1_percent(dropped, warned):
    """Of 100 planned (sent + dropped): 1 is 1%, not above it."""
    assert bool(w.saturation_reasons({"dropped_iterations": dropped, "requests": 100 - dropped}, None, None)) == warned


@pytest.mark.parametrize("rps, warned", [(95.0, False), (94.9, True)])
def test_a_rate_warns_below_95_percent_held(rps, warned):
    assert bool(w.saturation_reasons({"rps": rps}, 100, None)) == warned


@pytest.mark.parametrize("cores, warned", [(1.79, False), (1.8, True)])
def test_the_generator_warns_at_90_percent_of_its_cpus(cores, warned):
    got = w.saturation_reasons({"generator_cpu_cores": cores}, None, 2)
    assert got == ([f"openloop used {cores:.2f} of its 2 CPUs"] if warned else [])


@pytest.mark.parametrize("fill, warned", [(0.79, False), (0.8, True)])
def test_conntrack_warns_at_80_percent_full(fill, warned):
    got = w.figure_warnings([{"name": "ping__tcp__r1", "figures": {"conntrack_fill": fill}}])
    assert [x["kind"] for x in got] == (["conntrack_full"] if warned else [])


def workloads(rps, ratio=None):
    """One workload of tcp and uds at these requests/s; uds's ratio to tcp."""
    paths = {"tcp": {"phases": ["ping__tcp__r1"], "mean": {"rps": rps[0]}, "ratio_to_tcp": None},
             "uds": {"phases": ["ping__uds__r1"], "mean": {"rps": rps[1]}, "ratio_to_tcp": ratio}}
    return {"ping": {"tcp_measured": True, "paths": paths}}


@pytest.mark.parametrize("rps, warned", [((100, 105), False), ((100, 104.9), True)])
def test_one_ceiling_is_warned_within_5_percent_not_at_it(rps, warned):
    got = [x["kind"] for x in w.ratio_warnings(workloads(rps), SETTINGS)]
    assert got == (["same_ceiling"] if warned else [])


def test_a_ratio_cell_gives_an_interval_only_where_it_is_one_to_read():
    """Its own interval excludes 1, Benjamini-Hochberg's over the report does
    not: the cell is marked (‡, which the table's legend explains) and gives
    no interval, and its verdict says why; an interval that includes 1 is
    shown as such; a difference of one counter step is no ratio to read. No
    warning repeats any of them."""
    from report.markdown import fmt_ratio
    from report.stats import verdict
    r = {"mean": 1.1, "lo": 1.05, "hi": 1.15, "p": 0.01, "p_fdr": 0.2, "fdr_family": 12, "rounds": 4,
         "method": "paired t-interval over rounds, log scale"}
    assert fmt_ratio(r) == "1.10x ‡"
    assert verdict("uds", r).startswith("no measurable difference from tcp once the report's 12 comparisons")
    ratios = {"rps": r, **{k: None for k in ("client_p50_ms", "client_p99_ms", "app_cpu_us_per_req",
                                             "app_ctx_switches_per_req", "nginx_cpu_us_per_req")}}
    assert w.ratio_warnings(workloads((100, 110), ratios), SETTINGS) == []
    r.pop("p_fdr")
    assert fmt_ratio(r) == "1.10x (1.05-1.15)" and verdict("uds", r).startswith("uds 1.10x tcp")
    r.update({"below_resolution": 1.0})
    assert fmt_ratio(r) == "1.10x (below the counter's resolution)"
    assert verdict("uds", r) == "no measurable difference from tcp (below the counter's resolution)"
    r.pop("below_resolution")
    r.update({"lo": 0.9, "p": 0.2})
    assert fmt_ratio(r) == "1.10x (0.90-1.15)" and w.ratio_warnings(workloads((100, 110), ratios), SETTINGS) == []


def test_a_ratio_of_one_counter_step_is_marked_below_its_resolution():
    """Two paths whose app context switches differ by one tick of their counter
    (the phase's resolution): the ratio is quantisation, not a finding."""
    from report.stats import aggregate
    def phase(path, r, v):
        return {"workload": "ping", "path": path, "round": r, "name": f"ping__{path}__r{r}",
                "figures": {"app_ctx_switches_per_req": v}, "resolution": {"app_ctx_switches_per_req": 0.001}}
    phases = [phase("tcp", r, 0.0100) for r in (1, 2, 3)] + [phase("uds", r, v) for r, v in ((1, 0.0091), (2, 0.0092), (3, 0.0093))]
    r = aggregate(phases, {"paths": ["tcp", "uds"], "workloads": ["ping"]})["ping"]["paths"]["uds"]["ratio_to_tcp"]
    assert r["app_ctx_switches_per_req"]["below_resolution"] == 0.001  # 0.0092 against 0.0100: under one step
    phases = [phase("tcp", r, 0.0200) for r in (1, 2, 3)] + [phase("uds", r, v) for r, v in ((1, 0.0091), (2, 0.0092), (3, 0.0093))]
    r = aggregate(phases, {"paths": ["tcp", "uds"], "workloads": ["ping"]})["ping"]["paths"]["uds"]["ratio_to_tcp"]
    assert "below_resolution" not in r["app_ctx_switches_per_req"]


EIGHT = ("tcp", "uds", "tcp-ka", "uds-ka", "tcp-lo", "tcp-lo-ka", "uds-lo", "uds-lo-ka")


def clean_default_run(seed=4, late=None, failed=None, duration=5):
    """A run at make load's defaults (the catalogue's eight paths, ROUNDS=4,
    500 req/s, 5 s phases, a 60 s stream per connection handling) where
    nothing went wrong: every collector up, cAdvisor sampling less often than
    a phase is long (read from the samples around it), rounds that spread (a
    ratio interval or two includes 1), seconds with noise. late and failed:
    one cause injected ({phase name part: share})."""
    import numpy as np
    from report.testkit import cadvisor_table, make_k6, matrix
    rng = np.random.default_rng(seed)
    base = {p: 0.30 if p.endswith("ka") else 0.45 - (0.06 if p.startswith("uds") else 0.0) for p in EIGHT}

    def stream_of(paths):
        return {p: {"requests": 7500, "failed_rate": 0.0, "statuses": {}, "duration_ms": {
                    "p50": base[p], "p90": 1.5 * base[p], "p95": 2 * base[p], "p99": 3 * base[p], "p999": 9 * base[p]},
                    "blocks": [{"requests": 125, "failed": 0, "p50": float(base[p] + s + 0.01 * rng.standard_normal())}
                               for s in 0.03 * rng.standard_normal(60)]} for p in paths}

    def client(path, r):
        if path == "mix":
            return {}
        return {"duration_ms": {"p50": float(base[path] * (1 + 0.08 * rng.standard_normal()))}, "late_rate": 0.02}

    k6 = make_k6(paths=EIGHT, rounds=4, rate=500, duration=duration, interleave=60, block=1, split=True,
                 client=client)
    for p in k6["phases"]:
        if p["path"] == "mix":
            p["by_path"] = stream_of(p["paths"]) if p["round"] else {}
            p["late_rate"] = 0.02
    for name, share in (late or {}).items():
        next(p for p in k6["phases"] if name in p["name"] and p["round"])["late_rate"] = share
    for name, share in (failed or {}).items():
        next(p for p in k6["phases"] if name in p["name"] and p["round"])["failed_rate"] = share
    cpu = lambda t, start: 100 + 0.04 * (t - start)  # noqa: E731
    raw = lambda start, end: matrix([(t, cpu(t, start)) for t in (start - 6, start + 2, end + 4)])  # noqa: E731
    return k6, cadvisor_table(k6, raw)


def test_a_clean_default_run_has_no_warning():
    """Eight warnings on a run where nothing went wrong (a p99 ratio whose
    interval included 1, seven times; figures read from the samples around
    their phase, once) taught readers to skip the place where a real failure
    is announced."""
    from report.testkit import build
    k6, table = clean_default_run()
    rep = build(k6, table)
    assert rep["warnings"] == []
    # What the warnings said before is in the tables: estimates marked, intervals that include 1 shown.
    from report.markdown import render_markdown
    md = render_markdown(rep)
    assert "Estimates: nginx CPU/req in 32 of 32 phases" in md and "## Warnings\n\n- none" in md


@pytest.mark.parametrize("cause, kind", [
    ({"late": {"uds-lo__r2": 0.08}}, "saturated"),
    ({"late": {"mix-new": 0.2}}, "saturated"),  # 11% over both streams
    ({"failed": {"tcp-ka__r3": 0.002}}, "errors"),
    ({"duration": 3}, "short_phase"),
    ({"cadvisor": 0}, "missing_figures"),
])
def test_each_warnings_cause_injected_into_a_clean_run_is_warned(cause, kind):
    from report.testkit import build
    cause = dict(cause)  # the parameter's own dict stays whole for a second run in one process (mutmut's)
    up = cause.pop("cadvisor", 1)
    k6, table = clean_default_run(**cause)
    if not up:  # cAdvisor not running: no series, and its up says so
        table.update({'up{job="cadvisor"}': 0, "container_cpu_usage_seconds_total": None})
    assert {x["kind"] for x in build(k6, table)["warnings"]} == {kind}


def test_a_phase_whose_load_did_not_go_out_is_named_in_the_warning():
    # openloop's load.json: the run's failures under 1%, one phase over 1% dropped (loadgen/openloop/summary.go).
    from report.context import thresholds_warning
    w = thresholds_warning("openloop", ["dropped_iterations:ping__mix__r1"])
    assert w["kind"] == "generator_thresholds" and w["phases"] == ["ping__mix__r1"]
    assert "the load of ping__mix__r1 did not go out" in w["message"] and "dropped_iterations" not in w["message"]
    both = thresholds_warning("openloop", ["http_req_failed", "dropped_iterations:a__mix__r1",
                                           "dropped_iterations:b__tcp__r2"])
    assert both["phases"] == ["a__mix__r1", "b__tcp__r2"]
    assert both["message"].startswith("openloop's thresholds failed: http_req_failed; the load of a__mix__r1, b__tcp__r2")
