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


def test_a_ratio_lost_to_the_reports_correction_says_so():
    """Its own interval excludes 1, Benjamini-Hochberg's over the report does not:
    said as lost to the comparisons judged together, not as an interval including 1."""
    r = {"mean": 1.1, "lo": 1.05, "hi": 1.15, "p": 0.01, "p_fdr": 0.2, "fdr_family": 12, "rounds": 4,
         "method": "paired t-interval over rounds, log scale"}
    ratios = {"rps": r, **{k: None for k in ("client_p50_ms", "client_p99_ms", "app_cpu_us_per_req",
                                             "app_ctx_switches_per_req", "nginx_cpu_us_per_req")}}
    (spread,) = [x for x in w.ratio_warnings(workloads((100, 110), ratios), SETTINGS) if x["kind"] == "spread"]
    assert "requests/s: no measurable difference from tcp once the report's comparisons are judged together" \
        in spread["message"] and "includes 1" not in spread["message"]
    r.pop("p_fdr")
    r.update({"lo": 0.9, "p": 0.2})
    (spread,) = [x for x in w.ratio_warnings(workloads((100, 110), ratios), SETTINGS) if x["kind"] == "spread"]
    assert "includes 1" in spread["message"]
