"""A figure the report cannot give is n/a, never zero, and says why: a series
Prometheus does not have, NaN and zero denominators, a run with no start
time, cAdvisor's sparse counters read from the samples around a phase, and
a collector or an app's metrics missing (on compose and on a cluster)."""
import json

import pytest

from report import context, markdown, queries
from report.testkit import (
    CLUSTER, COMPOSE, MACHINE, build, cadvisor_table, fake_query, kinds, make_k6, matrix, server_table)


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


# ---------------------------------------------------------------- sparse counters and missing figures


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
