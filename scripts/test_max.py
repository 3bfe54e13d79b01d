"""Tests of scripts/max.py's pure parts: settings, routes, plan, wrk's output."""
import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("uds_lab_max", Path(__file__).resolve().parent / "max.py")
mx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mx)

WORKLOADS = mx.CATALOGUE["workloads"]


def test_defaults_and_routes_match_k6s_workloads():
    s = mx.read_settings({}, WORKLOADS)
    assert s["mode"] == "max" and s["generator"] == "wrk" and s["paths"] == mx.KNOWN_PATHS
    r = mx.routes(WORKLOADS, {**s, "cpu_iterations": 7, "sleep_ms": 3, "endpoint": "/mine"})
    assert r["ping"] == "/ping" and r["cpu"] == "/cpu/7" and r["sleep"] == "/sleep/3" and r["custom"] == "/mine"


@pytest.mark.parametrize("env, message", [
    ({"CONNECTIONS": "0"}, 'CONNECTIONS="0": must be a whole number >= 1'),
    ({"DURATION": "ten"}, 'DURATION="ten": must be a whole number >= 1'),
    ({"PATHS": "tcp,udp"}, 'PATHS: unknown "udp"'),
    ({"SCENARIO": "nope"}, 'SCENARIO: unknown "nope"'),
    ({"CONNECTIONS": "2", "WRK_THREADS": "4"}, "CONNECTIONS=2: must be >= WRK_THREADS=4"),
    ({"ENDPOINT": "x"}, 'ENDPOINT="x": must start with /'),
])
def test_bad_settings_are_named(env, message):
    with pytest.raises(mx.SettingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        mx.read_settings(env, WORKLOADS)


def test_plan_warms_up_then_alternates_rounds():
    s = mx.read_settings({"PATHS": "tcp,uds", "ROUNDS": "2", "WARMUP": "3", "DURATION": "10"}, WORKLOADS)
    names = [p["name"] for p in mx.plan(s, mx.routes(WORKLOADS, s))]
    assert names == ["ping__tcp__r0", "ping__uds__r0", "ping__tcp__r1", "ping__uds__r1", "ping__tcp__r2", "ping__uds__r2"]


def test_parse_output_reads_stamps_and_summary():
    out = "1763820000123\nRunning 10s test @ http://nginx:8080/tcp/ping\n  1 threads and 64 connections\n" \
          '{"wrk_summary":{"requests":80000,"duration_s":10.0,"errors":0,"non_2xx_3xx":0,' \
          '"latency_ms":{"avg":0.8,"p50":0.7,"p90":1.1,"p95":1.3,"p99":2.0,"max":9.0}}}\n1763820010456\n'
    start, end, w = mx.parse_output(out)
    assert (start, end, w["requests"], w["latency_ms"]["p99"]) == (1763820000123, 1763820010456, 80000, 2.0)
    with pytest.raises(RuntimeError):
        mx.parse_output("wrk: connection refused")
