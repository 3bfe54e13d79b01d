"""The report's warnings where the load generator was the limit (dropped
iterations, a rate short of RATE, requests sent late, its CPU, one ceiling
for every path flat out), where requests failed (k6's, wrk's, nginx's 5xx),
and where phases were too short to judge."""

import pytest

from report import markdown
from report.testkit import build, by_phase, kinds, make_k6, max_k6, server_table


# ---------------------------------------------------------------- the generator as the limit


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


def test_max_mode_warns_when_every_path_hits_one_ceiling():
    rep = build(max_k6(lambda p: {"tcp": 7500, "uds": 7600, "tcp-ka": 7700, "uds-ka": 7650}[p]))
    ceiling = [w for w in rep["warnings"] if w["kind"] == "same_ceiling"]
    assert len(ceiling) == 1 and "k6's limit" in ceiling[0]["message"] and "GENERATOR=wrk" in ceiling[0]["message"]


def test_max_mode_without_generator_cpu_says_so():
    k6 = max_k6(lambda p: {"tcp": 7500, "uds": 10000, "tcp-ka": 11500, "uds-ka": 12000}[p])
    table = server_table(k6, {("container_cpu_usage_seconds_total", 'service="k6"'): None})
    rep = build(k6, table)
    unknown = [w for w in rep["warnings"] if w["kind"] == "generator_cpu_unknown"]
    assert len(unknown) == 1 and "GENERATOR=wrk" in unknown[0]["message"]
    assert "generator_cpu_unknown" not in kinds(build(k6))  # with cAdvisor's figure


def test_short_phases_are_flagged():
    rep = build(make_k6(duration=4, rounds=2))
    short = [w for w in rep["warnings"] if w["kind"] == "short_phase"]
    assert len(short) == 1 and len(short[0]["phases"]) == 8 and "DURATION >= 5" in short[0]["message"]
    assert "short_phase" not in kinds(build(make_k6(duration=5, rounds=2)))


# ---------------------------------------------------------------- errors


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
