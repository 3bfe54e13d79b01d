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


def wrk_settings(env):
    return runplan.read_settings(wrk_runner.wrk_env(env), CATALOGUE)


def test_defaults_and_routes():
    s = wrk_settings({})
    # Every path but the A/A calibration twins.
    assert s["mode"] == "max" and s["generator"] == "wrk" and s["paths"] == [
        "tcp", "uds", "tcp-ka", "uds-ka", "tcp-lo", "tcp-lo-ka", "uds-lo", "uds-lo-ka"]
    assert (s["rounds"], s["duration"], s["warmup"], s["threads"]) == (4, 5, 3, 1) and "rate" not in s
    assert isinstance(s["seed"], int)  # drawn when SEED is unset, and recorded
    r = runplan.routes(WORKLOADS, {**s, "cpu_iterations": 7, "sleep_ms": 3, "endpoint": "/mine"})
    assert r["ping"] == "/ping" and r["cpu"] == "/cpu/7" and r["sleep"] == "/sleep/3" and r["custom"] == "/mine"


@pytest.mark.parametrize("env, message", [
    ({"CONNECTIONS": "0"}, 'CONNECTIONS="0": must be a whole number >= 1'),
    ({"DURATION": "ten"}, 'DURATION="ten": must be a whole number >= 1'),
    ({"PATHS": "tcp,udp"}, 'PATHS: unknown "udp"'),
    ({"PATHS": "tcp,uds,tcp"}, "PATHS: tcp,uds,tcp names one twice"),
    ({"SCENARIO": "nope"}, 'SCENARIO: unknown "nope"'),
    ({"CONNECTIONS": "2", "WRK_THREADS": "4"}, "CONNECTIONS=2: must be >= WRK_THREADS=4"),
    ({"ENDPOINT": "x"}, 'ENDPOINT="x": must start with /'),
    ({"IDLE": "-1"}, 'IDLE="-1": must be a whole number >= 0'),
    ({"IDLE": "5s"}, 'IDLE="5s": must be a whole number >= 0'),
    ({"SEED": "abc"}, 'SEED="abc": must be a whole number >= 0'),
])
def test_bad_settings_are_named(env, message):
    with pytest.raises(runplan.SettingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        wrk_settings(env)


@pytest.mark.parametrize("env, message", [
    ({"MODE": "fast"}, 'MODE="fast": must be one of rate, max'),
    ({"GENERATOR": "ab"}, 'GENERATOR="ab": must be one of openloop, k6, wrk'),
    ({"GENERATOR": "wrk", "MODE": "rate"}, "GENERATOR=wrk: runs MODE=max or sweep, not rate"),
    ({"RATE": "0"}, 'RATE="0": must be a whole number >= 1'),
])
def test_bad_mode_generator_and_rate_are_named(env, message):
    with pytest.raises(runplan.SettingError, match=message):
        runplan.read_settings(env, CATALOGUE)


@pytest.mark.parametrize("n", range(1, 10))
def test_williams_rows_balance_positions_and_neighbours(n):
    rows = runplan.williams(n)
    assert len(rows) == (2 * n if n % 2 and n > 1 else n)
    for position in range(n):
        counts = [sum(row[position] == x for row in rows) for x in range(n)]
        assert len(set(counts)) == 1, (position, counts)  # every symbol as often in every position
    pairs = {}
    for row in rows:
        for a, b in zip(row, row[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + 1
    # every ordered pair of neighbours, each as often
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) <= 1


def test_orders_are_counterbalanced_and_repeatable():
    paths = list(CATALOGUE["paths"])
    first = runplan.orders(paths, 12, seed=5)
    assert first == runplan.orders(paths, 12, seed=5) != runplan.orders(paths, 12, seed=6)
    assert all(sorted(o) == sorted(paths) for o in first)
    # Over len(paths) rounds each path runs first once, and after each other path once.
    square = first[:len(paths)]
    assert sorted(o[0] for o in square) == sorted(paths)
    for p in paths:
        before = [o[o.index(p) - 1] for o in square if o.index(p) > 0]
        assert sorted(before) == sorted(set(paths) - {p}), p


def test_plan_warms_up_then_runs_rounds_with_each_pair_back_to_back():
    s = runplan.read_settings({"PATHS": "tcp,uds,tcp-lo", "ROUNDS": "6", "WARMUP": "3", "DURATION": "10",
                               "SCENARIO": "ping,cpu", "IDLE": "0", "SEED": "3", "MODE": "max"}, CATALOGUE)
    assert s["pairs"] == [["tcp", "uds"], ["tcp-lo"]]  # the answer's pair; tcp-lo has no partner here
    phases = runplan.plan(s, runplan.routes(WORKLOADS, s))
    assert [p["name"] for p in phases[:3]] == ["ping__tcp__r0", "ping__uds__r0", "ping__tcp-lo__r0"]
    assert all(p["phase"] == "warmup" for p in phases[:3]) and phases[3]["phase"] == "measure"
    rounds = [[p["path"] for p in phases if p["workload"] == "ping" and p["round"] == r] for r in range(1, 7)]
    assert rounds == runplan.paired_orders(s["pairs"], 6, 3)
    for r in rounds:  # tcp and uds adjacent, and which one first alternates
        assert abs(r.index("tcp") - r.index("uds")) == 1
    firsts = [r.index("tcp") < r.index("uds") for r in rounds]
    assert all(a != b for a, b in zip(firsts, firsts[1:])), firsts
    assert [p["start_offset_s"] for p in phases[:3]] == [0, 4, 8]  # 3 s warm-up + 1 s gap
    # 2 workloads x 3 paths x (3 + 6 x 10) s, and 41 gaps of 1 s.
    assert runplan.length_s(phases) == 2 * 3 * (3 + 6 * 10) + 41 * 1
    s = runplan.read_settings({"PATHS": "tcp", "ROUNDS": "1", "WARMUP": "0", "INTERLEAVE": "0"}, CATALOGUE)
    assert [p["name"] for p in runplan.plan(s, runplan.routes(WORKLOADS, s))] == ["ping__tcp__r1"]


def test_every_path_in_at_most_one_pair_the_answers_first():
    units = runplan.pair_units([*CATALOGUE["paths"]], CATALOGUE)
    assert units[:4] == [["tcp-lo", "uds-lo"], ["tcp-lo-ka", "uds-lo-ka"], ["tcp", "uds"], ["tcp-ka", "uds-ka"]]
    assert sorted(p for u in units for p in u) == sorted(CATALOGUE["paths"])
    assert runplan.pair_units(["uds-lo-aa", "uds-lo"], CATALOGUE) == [["uds-lo", "uds-lo-aa"]]
    assert runplan.pair_units(["direct-uds", "direct-tcp"], CATALOGUE) == [["direct-tcp", "direct-uds"]]


def test_paired_orders_are_repeatable_and_a_later_batch_continues_them():
    units = runplan.pair_units(runplan.default_paths(CATALOGUE), CATALOGUE)
    first = runplan.paired_orders(units, 12, seed=5)
    assert first == runplan.paired_orders(units, 12, seed=5) != runplan.paired_orders(units, 12, seed=6)
    assert runplan.paired_orders(units, 5, seed=5) == first[:5]
    for u in units:  # over every two rounds, each path of a pair first once
        leads = [o.index(u[0]) < o.index(u[1]) for o in first]
        assert [leads[i] != leads[i + 1] for i in range(0, 12, 2)] == [True] * 6


def test_make_load_interleaves_every_path_then_runs_them_one_at_a_time():
    s = runplan.read_settings({"PATHS": "tcp,uds", "ROUNDS": "2", "WARMUP": "3", "DURATION": "5", "IDLE": "0",
                               "INTERLEAVE": "20", "BLOCK": "2", "SEED": "1"}, CATALOGUE)
    phases = runplan.plan(s, runplan.routes(WORKLOADS, s))
    assert [(p["name"], p["start_offset_s"], p["duration_s"]) for p in phases[:2]] == [
        ("ping__mix__r0", 0, 3), ("ping__mix__r1", 4, 20)]
    assert phases[1]["paths"] == ["tcp", "uds"] and phases[1]["block_s"] == 2
    assert [p["round"] for p in phases[2:]] == [1, 1, 2, 2] and phases[2]["start_offset_s"] == 25
    s = runplan.read_settings({"PATHS": "tcp,uds", "ROUNDS": "0", "IDLE": "0", "INTERLEAVE": "20"}, CATALOGUE)
    assert [p["name"] for p in runplan.plan(s, runplan.routes(WORKLOADS, s))] == ["ping__mix__r0", "ping__mix__r1"]


@pytest.mark.parametrize("env, message", [
    ({"INTERLEAVE": "5"}, "INTERLEAVE=5: must be a whole number of BLOCK=1 s blocks, at least 10 of them"),
    ({"INTERLEAVE": "25", "BLOCK": "2"}, "INTERLEAVE=25: must be a whole number of BLOCK=2 s blocks"),
    ({"BLOCK": "0"}, 'BLOCK="0": must be a whole number >= 1'),
    ({"ROUNDS": "0", "INTERLEAVE": "0"}, 'ROUNDS="0": must be a whole number >= 1 \\(0 only for make load with'),
    ({"ROUNDS": "0", "MODE": "max"}, 'ROUNDS="0": must be a whole number >= 1'),
])
def test_bad_interleave_settings_are_named(env, message):
    with pytest.raises(runplan.SettingError, match=message):
        runplan.read_settings(env, CATALOGUE)


@pytest.mark.parametrize("idle, first", [("0", 0), ("1", 2), ("10", 11)])
def test_the_idle_phase_comes_first(idle, first):
    """IDLE seconds with no requests, then a gap, then the first phase; IDLE=0: none."""
    s = runplan.read_settings({"PATHS": "tcp", "ROUNDS": "1", "WARMUP": "0", "DURATION": "5", "IDLE": idle,
                               "INTERLEAVE": "0"}, CATALOGUE)
    phases = runplan.plan(s, runplan.routes(WORKLOADS, s))
    assert phases[0]["start_offset_s"] == first and runplan.length_s(phases) == first + 5
    want = None if idle == "0" else {"start_offset_s": 0, "duration_s": int(idle)}
    assert runplan.idle_window(s) == want
    assert (f"{idle} s idle + " in runplan.describe(s, phases)) == (idle != "0")


def test_the_default_plan_states_its_length():
    """`make load` with .env's defaults (docs quote these lines): what it says
    before it starts and as each phase starts."""
    s = runplan.read_settings({"SEED": "42"}, CATALOGUE)
    phases = runplan.plan(s, runplan.routes(WORKLOADS, s))
    # 10 s idle + 1 s, two streams (the 4 pooled paths', then the 4 others') of 3 s warm-up + 1 s and 60 s + 1 s,
    # then 4 x 8 x 5 s = 160 s and 31 gaps of 1 s: 332 s.
    assert runplan.describe(s, phases) == (
        "36 phases, about 5m32s: 10 s idle + 1 workload(s) x (3 s warm-up + 60 s of the 4 pooled paths interleaved "
        "request by request, then the same of the 4 new-connection paths, then 4 x 8 paths x 5 s one at a time for "
        "their costs), 1 s between phases, order drawn from SEED=42, compared paths back to back in alternating order")
    assert runplan.progress(phases, 0) == ("phase 1/36 ping__mix-pooled__r0 (pooled paths interleaved, warm-up): "
                                           "about 5m21s left")
    assert runplan.progress(phases, 1) == "phase 2/36 ping__mix-pooled__r1 (pooled paths interleaved): about 5m17s left"
    assert runplan.progress(phases, 3) == "phase 4/36 ping__mix-new__r1 (new-connection paths interleaved): about 4m12s left"
    assert runplan.progress(phases, 35) == f"phase 36/36 {phases[-1]['name']}: about 5s left"
    assert [p["paths"] for p in phases[:4]] == [["tcp-ka", "uds-ka", "tcp-lo-ka", "uds-lo-ka"]] * 2 + \
        [["tcp", "uds", "tcp-lo", "uds-lo"]] * 2


def test_plan_py_writes_the_plan_openloop_runs(tmp_path):
    env = {"TESTID": "p1", "RESULTS": str(tmp_path), "PATHS": "tcp,uds", "ROUNDS": "2", "MODE": "rate",
           "RATE": "50", "SEED": "9", "INTERLEAVE": "0"}
    res = subprocess.run([sys.executable, str(runplan.HERE / "plan.py")], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "p1" / "plan.json").read_text())
    assert doc == json.loads(json.dumps(runplan.build(env, CATALOGUE)))
    assert doc["settings"]["seed"] == 9 and doc["settings"]["rate"] == 50
    assert doc["phases"][0]["url"] == "http://nginx:8080/tcp/ping"
    assert doc["phases"][0]["progress"].startswith("phase 1/6 ping__tcp__r0 (warm-up, left out of the report): about ")


@pytest.mark.parametrize("env, line", [
    ({"RATE": "abc"}, 'make: RATE="abc": must be a whole number >= 1\n'),
    ({"PATHS": "tcp,nope"}, 'make: PATHS: unknown "nope" (known: '
     + ", ".join([*CATALOGUE["paths"], *CATALOGUE["direct"]["paths"]]) + ")\n"),
    ({"SCENARIO": "nope"}, 'make: SCENARIO: unknown "nope" (known: ' + ", ".join(WORKLOADS) + ")\n"),
    ({"DURATION": "0"}, 'make: DURATION="0": must be a whole number >= 1\n'),
    ({"TESTID": "a b"}, 'make: TESTID="a b": use letters, digits, . _ -\n'),
])
def test_plan_py_names_a_bad_setting_in_one_line(tmp_path, env, line):
    res = subprocess.run([sys.executable, str(runplan.HERE / "plan.py")],
                         env={"TESTID": "p2", "RESULTS": str(tmp_path), **env}, capture_output=True, text=True)
    assert (res.returncode, res.stderr, res.stdout) == (2, line, "")
    assert not (tmp_path / "p2").exists()


def test_parse_output_reads_stamps_and_summary():
    out = "1763820000123\nRunning 10s test @ http://nginx:8080/tcp/ping\n  1 threads and 64 connections\n" \
          '{"wrk_summary":{"requests":80000,"duration_s":10.0,"errors":0,"non_2xx_3xx":0,' \
          '"by_kind":{"connect":0,"read":0,"write":0,"timeout":0},' \
          '"latency_ms":{"avg":0.8,"p50":0.7,"p90":1.1,"p95":1.3,"p99":2.0,"p999":4.0,"max":9.0}}}\n1763820010456\n'
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
    assert "1 phases, about 3s: 1 s idle + 1 workload(s) x 1 paths x (1 x 1 s)" in res.stdout
    assert "phase 1/1 bytes-100__tcp-ka__r1: about 1s left" in res.stdout
    assert "idle 1 s: no requests" in res.stdout
    load = json.loads((tmp_path / "w1" / "load.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    (ph,) = load["phases"]
    assert ph["name"] == "bytes-100__tcp-ka__r1" and ph["endpoint"] == "/bytes/100" and ph["requests"] > 0
    assert ph["failed_rate"] == 0 and load["settings"]["generator"] == "wrk"
    # The idle second, then the gap: the phase starts no earlier than planned.
    assert load["idle"] == {"start_offset_s": 0, "duration_s": 1} and ph["start_offset_s"] >= 2
    assert hits.get("/tcp-ka/bytes/100", 0) >= ph["requests"]


def test_wrk_runs_a_sweep_of_connections_step_with_its_connections(tmp_path, local_catalogue):
    """make sweep SWEEP=connections GENERATOR=wrk, step 2: each phase flat out
    at the step's connections, load-s2.json with how the path failed (a 502
    route: every answer a non-2xx)."""
    if shutil.which("wrk") is None:
        pytest.fail("wrk is not installed: scripts/test-deps.sh installs Debian's wrk")
    catalogue, hits = local_catalogue
    env = {**os.environ, "WRK_LOCAL": "1", "CATALOGUE": str(catalogue), "RESULTS": str(tmp_path), "TESTID": "w2",
           "MODE": "sweep", "SWEEP": "connections", "SWEEP_CONNECTIONS": "1,3", "SWEEP_STEP": "2",
           "SWEEP_ROUNDS": "2", "PATHS": "uds", "SCENARIO": "custom", "ENDPOINT": "/status/502", "WARMUP": "0",
           "DURATION": "1", "WRK_THREADS": "1", "IDLE": "0"}
    res = subprocess.run([sys.executable, str(runplan.HERE / "wrk_runner.py")], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 1, res.stdout + res.stderr  # every answer a 502: more than 1% failed
    assert "sweep step 2/2 at 3 connections flat out (wrk)" in res.stdout
    assert [p.name for p in (tmp_path / "w2").iterdir()] == ["load-s2.json"]
    load = json.loads((tmp_path / "w2" / "load-s2.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    for ph in load["phases"]:
        assert (ph["step"], ph["connections"], ph["failed_rate"]) == (2, 3, 1)
        assert ph["statuses"] == {"non_2xx_3xx": ph["requests"], "connect": 0, "read": 0, "write": 0, "timeout": 0}
        assert "p999" in ph["duration_ms"]
    assert hits["/uds/status/502"] >= sum(p["requests"] for p in load["phases"])
