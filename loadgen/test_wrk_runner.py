"""Tests of the plan (plan.py) and the wrk runner (wrk_runner.py): settings,
routes, the plan's order and length, wrk's output parsing, and the runner run
for real: Debian's wrk against a server on 127.0.0.1 for one second, its
load.json checked against load.schema.json."""
import json
import os
import shutil
import subprocess
import sys

import jsonschema
import pytest

import plan as runplan
import wrk_runner

CATALOGUE = runplan.read_catalogue({})
WORKLOADS = CATALOGUE["workloads"]


def test_defaults_and_routes():
    s = wrk_runner.read_settings({}, CATALOGUE)
    assert s["mode"] == "max" and s["generator"] == "wrk" and s["paths"] == list(CATALOGUE["paths"])
    r = runplan.routes(WORKLOADS, {**s, "cpu_iterations": 7, "sleep_ms": 3, "endpoint": "/mine"})
    assert r["ping"] == "/ping" and r["cpu"] == "/cpu/7" and r["sleep"] == "/sleep/3" and r["custom"] == "/mine"


@pytest.mark.parametrize("env, message", [
    ({"CONNECTIONS": "0"}, 'CONNECTIONS="0": must be a whole number >= 1'),
    ({"DURATION": "ten"}, 'DURATION="ten": must be a whole number >= 1'),
    ({"PATHS": "tcp,udp"}, 'PATHS: unknown "udp"'),
    ({"SCENARIO": "nope"}, 'SCENARIO: unknown "nope"'),
    ({"CONNECTIONS": "2", "WRK_THREADS": "4"}, "CONNECTIONS=2: must be >= WRK_THREADS=4"),
    ({"ENDPOINT": "x"}, 'ENDPOINT="x": must start with /'),
    ({"IDLE": "-1"}, 'IDLE="-1": must be a whole number >= 0'),
    ({"IDLE": "5s"}, 'IDLE="5s": must be a whole number >= 0'),
])
def test_bad_settings_are_named(env, message):
    with pytest.raises(runplan.SettingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        wrk_runner.read_settings(env, CATALOGUE)


def test_plan_warms_up_then_alternates_rounds():
    s = runplan.read_settings({"PATHS": "tcp,uds", "ROUNDS": "2", "WARMUP": "3", "DURATION": "10",
                               "SCENARIO": "ping,cpu", "IDLE": "0"}, CATALOGUE)
    phases = runplan.plan(s, runplan.routes(WORKLOADS, s))
    assert [p["name"] for p in phases] == [
        "ping__tcp__r0", "ping__uds__r0", "ping__tcp__r1", "ping__uds__r1", "ping__tcp__r2", "ping__uds__r2",
        "cpu__tcp__r0", "cpu__uds__r0", "cpu__tcp__r1", "cpu__uds__r1", "cpu__tcp__r2", "cpu__uds__r2"]
    assert [p["start_offset_s"] for p in phases[:3]] == [0, 5, 10]  # 3 s warm-up + 2 s gap
    assert phases[2]["phase"] == "measure" and phases[0]["phase"] == "warmup"
    # 2 workloads x 2 paths x (3 + 2 x 10) s, and 11 gaps of 2 s.
    assert runplan.length_s(phases) == 2 * 2 * (3 + 2 * 10) + 11 * 2
    s = runplan.read_settings({"PATHS": "tcp", "ROUNDS": "1", "WARMUP": "0"}, CATALOGUE)
    assert [p["name"] for p in runplan.plan(s, runplan.routes(WORKLOADS, s))] == ["ping__tcp__r1"]


@pytest.mark.parametrize("idle, first", [("0", 0), ("1", 3), ("10", 12)])
def test_the_idle_phase_comes_first(idle, first):
    """IDLE seconds with no requests, then a gap, then the first phase; IDLE=0: none."""
    s = runplan.read_settings({"PATHS": "tcp", "ROUNDS": "1", "WARMUP": "0", "DURATION": "5", "IDLE": idle},
                              CATALOGUE)
    phases = runplan.plan(s, runplan.routes(WORKLOADS, s))
    assert phases[0]["start_offset_s"] == first and runplan.length_s(phases) == first + 5
    want = None if idle == "0" else {"start_offset_s": 0, "duration_s": int(idle)}
    assert runplan.idle_window(s) == want
    assert (f"{idle} s idle + " in runplan.describe(s, phases)) == (idle != "0")


def test_the_default_plan_states_its_length():
    """`make load` with .env's defaults (the README quotes these lines): what it
    says before it starts and as each phase starts."""
    s = runplan.read_settings({"PATHS": "tcp,uds,tcp-ka,uds-ka,tcp-lo,tcp-lo-ka,uds-lo"}, CATALOGUE)
    phases = runplan.plan(s, runplan.routes(WORKLOADS, s))
    # 10 s idle, then 1 workload x 7 paths x (5 s + 3 x 20 s) = 455 s, and 28 gaps of 2 s: 521 s.
    assert runplan.describe(s, phases) == (
        "28 phases, about 8m41s: 10 s idle + 1 workload(s) x 7 paths x (5 s warm-up + 3 x 20 s), "
        "2 s between phases")
    assert runplan.progress(phases, 0) == "phase 1/28 ping__tcp__r0: about 8m29s left"
    assert runplan.progress(phases, 27) == "phase 28/28 ping__uds-lo__r3: about 20s left"
    assert runplan.clock(3725) == "1h02m05s"


def test_parse_output_reads_stamps_and_summary():
    out = "1763820000123\nRunning 10s test @ http://nginx:8080/tcp/ping\n  1 threads and 64 connections\n" \
          '{"wrk_summary":{"requests":80000,"duration_s":10.0,"errors":0,"non_2xx_3xx":0,' \
          '"latency_ms":{"avg":0.8,"p50":0.7,"p90":1.1,"p95":1.3,"p99":2.0,"max":9.0}}}\n1763820010456\n'
    start, end, w = wrk_runner.parse_output(out)
    assert (start, end, w["requests"], w["latency_ms"]["p99"]) == (1763820000123, 1763820010456, 80000, 2.0)
    with pytest.raises(RuntimeError):
        wrk_runner.parse_output("wrk: connection refused")


def test_wrk_runner_writes_a_load_json_of_the_schemas_shape(tmp_path, local_catalogue):
    """The runner as `make max GENERATOR=wrk` runs it (WRK_LOCAL=1), with
    Debian's wrk, against a server on 127.0.0.1: one phase of one second."""
    if shutil.which("wrk") is None:
        pytest.fail("wrk is not installed: scripts/test-deps.sh installs Debian's wrk")
    catalogue, hits = local_catalogue
    env = {**os.environ, "WRK_LOCAL": "1", "CATALOGUE": str(catalogue), "RESULTS": str(tmp_path), "TESTID": "w1",
           "PATHS": "tcp-ka", "SCENARIO": "bytes-100", "ROUNDS": "1", "WARMUP": "0", "DURATION": "1",
           "CONNECTIONS": "2", "WRK_THREADS": "1", "IDLE": "1"}
    res = subprocess.run([sys.executable, str(runplan.HERE / "wrk_runner.py")], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 phases, about 4s: 1 s idle + 1 workload(s) x 1 paths x (1 x 1 s)" in res.stdout
    assert "phase 1/1 bytes-100__tcp-ka__r1: about 1s left" in res.stdout
    assert "idle 1 s: no requests" in res.stdout
    load = json.loads((tmp_path / "w1" / "load.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    (ph,) = load["phases"]
    assert ph["name"] == "bytes-100__tcp-ka__r1" and ph["endpoint"] == "/bytes/100" and ph["requests"] > 0
    assert ph["failed_rate"] == 0 and load["settings"]["generator"] == "wrk"
    # The idle second, then the gap: the phase starts no earlier than planned.
    assert load["idle"] == {"start_offset_s": 0, "duration_s": 1} and ph["start_offset_s"] >= 3
    assert hits.get("/tcp-ka/bytes/100", 0) >= ph["requests"]
