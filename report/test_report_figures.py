"""The report's figures from a synthetic load.json and a fake query function
(report/testkit.py): each phase's client and server figures and the window
its queries cover, the ratios to tcp taken per round, max mode's requests per
second, and the charts."""

import pytest

from report import charts, context, markdown, queries, stats
from report.testkit import (
    COMPOSE, MACHINE, START_MS, build, by_phase, fake_query, kinds, make_k6, max_k6, server_table)


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


# ---------------------------------------------------------------- max mode


def test_max_mode_judges_requests_per_second():
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p]))
    assert rep["mode"] == "max" and rep["headline"][0] == "rps"
    uds = rep["workloads"]["ping"]["paths"]["uds"]
    assert uds["ratio_to_tcp"]["rps"]["mean"] == pytest.approx(2.0)
    assert uds["verdict"].startswith("uds 2.00x tcp")
    # No target rate in max mode: reaching a different rate per path is the point.
    assert "saturated" not in kinds(rep) and "same_ceiling" not in kinds(rep)
    assert "throughput.png" in " ".join(f for f, _, _ in charts.chart_specs("ping", rep["workloads"]["ping"], rep["settings"]))


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
