"""loadgen/load.js run by the real k6 (the version in .env's K6_IMAGE, built by
scripts/test-deps.sh): it runs the plan plan.py wrote, phase for phase (read
with `k6 inspect`, no load), and a one-second run against a server on
127.0.0.1 writes a load.json of load.schema.json's shape beside the plan,
saying the plan's length first and each phase as it starts. The plan itself
is tested without k6 (test_wrk_runner.py)."""
import json
import os
import re
import subprocess

import jsonschema
import pytest

import plan as runplan
from conftest import built

SCRIPT = runplan.HERE / "load.js"
CATALOGUE = runplan.read_catalogue({})


@pytest.fixture(scope="module")
def k6():
    return built("k6")


def k6_env(**settings):
    """k6's environment: PLAN alone of the lab's settings (a K6_ one of the test's own must not reach it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("K6_")}
    # Nothing leaves the machine: no usage report.
    return {**env, "K6_NO_USAGE_REPORT": "true", **{k: str(v) for k, v in settings.items()}}


def write_plan(tmp_path, **settings):
    """plan.json as `make load` writes it (python3 plan.py); returns its path and content."""
    env = {"RESULTS": str(tmp_path), "TESTID": "k1", "SEED": "4", **{k: str(v) for k, v in settings.items()}}
    assert runplan.main(env) == 0
    path = tmp_path / env["TESTID"] / "plan.json"
    return path, json.loads(path.read_text())


def seconds(go_duration):
    """k6 prints durations as Go does: "1m18s" -> 78."""
    m = re.fullmatch(r"(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9.]+)s)?", go_duration)
    assert m and go_duration, go_duration
    h, mi, sec = m.groups()
    return int(h or 0) * 3600 + int(mi or 0) * 60 + float(sec or 0)


@pytest.mark.parametrize("settings", [
    {},  # .env's defaults
    {"SCENARIO": "ping,bytes-1k,cpu", "PATHS": "uds,tcp", "ROUNDS": "2", "WARMUP": "0", "DURATION": "7",
     "CPU_ITERATIONS": "12", "IDLE": "0"},
    {"MODE": "max", "SCENARIO": "custom", "ENDPOINT": "/mine", "PATHS": "tcp-lo-ka", "ROUNDS": "1", "WARMUP": "3",
     "IDLE": "4"},
])
def test_k6_runs_the_plan_plan_py_wrote(k6, tmp_path, settings):
    path, doc = write_plan(tmp_path, **settings)
    res = subprocess.run([k6, "inspect", "--include-system-env-vars", str(SCRIPT)], env=k6_env(PLAN=path),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    scenarios = json.loads(res.stdout)["scenarios"]
    phases = doc["phases"]
    assert sorted(scenarios) == sorted(p["name"] for p in phases)
    for p in phases:
        sc = scenarios[p["name"]]
        assert (seconds(sc["startTime"]), seconds(sc["duration"])) == (p["start_offset_s"], p["duration_s"]), sc
        assert sc["tags"] == {"path": p["path"], "workload": p["workload"], "round": str(p["round"]), "phase": p["phase"]}
        if p["path"] == "mix":  # every path's URL, and its blocks when measured
            assert json.loads(sc["env"]["LAB_PATHS"]) == [[q, p["urls"][q], f"/{q}{p['endpoint']}"] for q in p["paths"]]
            assert sc["env"]["LAB_BLOCK_MS"] == str(1000 * p["block_s"] if p["round"] else 0)
        else:
            assert sc["env"]["LAB_URL"] == p["url"]
        assert sc["env"]["LAB_PROGRESS"] == p["progress"]
        want = "constant-vus" if settings.get("MODE") == "max" else "constant-arrival-rate"
        assert sc["executor"] == want


def test_k6_without_a_plan_says_how_to_get_one(k6):
    res = subprocess.run([k6, "inspect", str(SCRIPT)], env=k6_env(), capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "PLAN: the plan.json to run" in res.stdout + res.stderr


@pytest.mark.parametrize("mode", ["rate", "max"])
def test_k6_writes_a_load_json_of_the_schemas_shape(k6, tmp_path, local_catalogue, mode):
    catalogue, hits = local_catalogue
    path, doc = write_plan(tmp_path, CATALOGUE=catalogue, MODE=mode, SCENARIO="bytes-100", PATHS="uds-ka", ROUNDS=1,
                           WARMUP=0, DURATION=1, RATE=20, CONNECTIONS=2, IDLE=1, INTERLEAVE=0)
    res = subprocess.run([k6, "run", "--quiet", "--no-color", str(SCRIPT)], env=k6_env(PLAN=path),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"uds-lab k6 run k1: {doc['describe']}" in res.stderr, res.stderr
    assert doc["phases"][0]["progress"] in res.stderr
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    stats = ("requests", "failed_rate", "dropped_iterations", "duration_ms", "statuses")
    # A max run, like a sweep, counts how a path fails (the backlog scenario's 502s).
    assert all(("statuses" in p) == (mode == "max") for p in load["phases"])
    planned = [{k: v for k, v in p.items() if k not in ("url", "progress")} for p in doc["phases"]]
    assert [{k: v for k, v in p.items() if k not in stats} for p in load["phases"]] == planned
    (ph,) = load["phases"]
    assert ph["requests"] > 0 and ph["failed_rate"] == 0 and hits["/uds-ka/bytes/100"] >= ph["requests"]
    assert load["settings"] == doc["settings"] and load["settings"]["mode"] == mode
    assert (load["gap_s"], load["idle"], load["urls"]) == (doc["gap_s"], {"start_offset_s": 0, "duration_s": 1}, doc["urls"])


def test_k6_writes_a_later_batchs_load_beside_its_plan(k6, tmp_path, local_catalogue):
    """A PRECISION run's batch from round 3: plan-r3.json in, load-r3.json out
    (loadgen/drive.py merges it), load.json untouched."""
    catalogue, _ = local_catalogue
    env = {"RESULTS": str(tmp_path), "TESTID": "k2", "SEED": "4", "CATALOGUE": str(catalogue), "PATHS": "uds",
           "INTERLEAVE": "0",
           "SCENARIO": "ping", "ROUNDS": "2", "DURATION": "1", "RATE": "20", "PRECISION": "5", "FIRST_ROUND": "3"}
    assert runplan.main(env) == 0
    res = subprocess.run([k6, "run", "--quiet", "--no-color", str(SCRIPT)],
                         env=k6_env(PLAN=tmp_path / "k2" / "plan-r3.json"), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name for p in (tmp_path / "k2").iterdir()) == ["load-r3.json", "plan-r3.json"]
    load = json.loads((tmp_path / "k2" / "load-r3.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    assert [p["round"] for p in load["phases"]] == [3, 4] and load["idle"] is None


def test_k6_interleaves_every_path_in_one_stream_and_writes_each_ones_blocks(k6, tmp_path, local_catalogue):
    """make load's interleaved phase: one arrival stream, every path in each
    cycle of len(paths) requests, each path's median per block in load.json."""
    catalogue, hits = local_catalogue
    path, doc = write_plan(tmp_path, CATALOGUE=catalogue, PATHS="tcp-lo,uds-lo,uds", ROUNDS=1, WARMUP=1, DURATION=1,
                           RATE=60, IDLE=0, INTERLEAVE=10)
    res = subprocess.run([k6, "run", "--quiet", "--no-color", str(SCRIPT)], env=k6_env(PLAN=path),
                         capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stdout + res.stderr
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    (mix,) = [p for p in load["phases"] if p["name"] == "ping__mix__r1"]
    assert sorted(mix["by_path"]) == ["tcp-lo", "uds", "uds-lo"]
    total = sum(v["requests"] for v in mix["by_path"].values())
    assert total == mix["requests"] >= 570  # 60 req/s for 10 s
    for p, v in mix["by_path"].items():
        assert abs(v["requests"] - total / 3) <= 1, (p, v["requests"])  # each path once a cycle
        assert len(v["blocks"]) == 10 and sum(b["requests"] for b in v["blocks"]) == v["requests"]
        assert all(b["requests"] >= 18 and b["p50"] > 0 for b in v["blocks"]), v["blocks"]
    # The stream and then each path alone: the server saw every request by its path.
    alone = {p["path"]: p["requests"] for p in load["phases"] if p["path"] != "mix"}
    warmup = next(p for p in load["phases"] if p["name"] == "ping__mix__r0")
    warm = warmup["requests"]
    assert sum(v["requests"] for v in warmup["by_path"].values()) == warm > 0  # by path, without blocks
    assert all(v["blocks"] == [] for v in warmup["by_path"].values())
    assert sum(hits[f"/{p}/ping"] for p in alone) == total + warm + sum(alone.values())


def test_k6_runs_a_sweeps_step_at_its_rate_and_counts_how_a_path_fails(k6, tmp_path, local_catalogue):
    """make sweep's step 2: plan-s2.json in, load-s2.json out, each phase at
    the step's rate and with its failing responses by status (a 502 route here)."""
    catalogue, hits = local_catalogue
    env = {"RESULTS": str(tmp_path), "TESTID": "k3", "SEED": "4", "CATALOGUE": str(catalogue), "MODE": "sweep",
           "PATHS": "uds", "SCENARIO": "custom", "ENDPOINT": "/status/502", "SWEEP_RATES": "10,30",
           "SWEEP_STEP": "2", "SWEEP_ROUNDS": "2", "DURATION": "1", "WARMUP": "0", "IDLE": "0", "INTERLEAVE": "0"}
    assert runplan.main(env) == 0
    res = subprocess.run([k6, "run", "--quiet", "--no-color", str(SCRIPT)],
                         env=k6_env(PLAN=tmp_path / "k3" / "plan-s2.json"), capture_output=True, text=True, timeout=60)
    assert res.returncode != 0  # every request failed: the 1% threshold fails, as past a limit
    assert sorted(p.name for p in (tmp_path / "k3").iterdir()) == ["load-s2.json", "plan-s2.json"]
    load = json.loads((tmp_path / "k3" / "load-s2.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    assert [(p["step"], p["rate"], p["round"]) for p in load["phases"]] == [(2, 30, 1), (2, 30, 2)]
    for p in load["phases"]:
        assert p["requests"] >= 25 and p["failed_rate"] == 1  # 30 req/s for 1 s
        assert p["statuses"] == {"502": p["requests"], "503": 0, "504": 0, "0": 0, "refused": 0, "reset": 0,
                                 "timeout": 0, "connect_timeout": 0}
        assert "p999" in p["duration_ms"]
    assert hits["/uds/status/502"] == sum(p["requests"] for p in load["phases"])


def test_k6_runs_a_sweeps_interleaved_stream_at_the_steps_rate(k6, tmp_path, local_catalogue):
    """A sweep's step opens with its stream: every path of the step in one
    arrival stream at the step's rate, counted per path and per block."""
    catalogue, hits = local_catalogue
    env = {"RESULTS": str(tmp_path), "TESTID": "k4", "SEED": "4", "CATALOGUE": str(catalogue), "MODE": "sweep",
           "PATHS": "tcp,uds", "SWEEP_RATES": "10,40", "SWEEP_STEP": "2", "SWEEP_ROUNDS": "2", "DURATION": "1",
           "WARMUP": "0", "IDLE": "0", "INTERLEAVE": "10"}
    assert runplan.main(env) == 0
    res = subprocess.run([k6, "run", "--quiet", "--no-color", str(SCRIPT)],
                         env=k6_env(PLAN=tmp_path / "k4" / "plan-s2.json"), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    load = json.loads((tmp_path / "k4" / "load-s2.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    mix = load["phases"][0]
    assert (mix["path"], mix["step"], mix["rate"]) == ("mix", 2, 40)
    assert set(mix["by_path"]) == {"tcp", "uds"}
    for v in mix["by_path"].values():
        assert 150 <= v["requests"] <= 250 and len(v["blocks"]) == 10  # 40 req/s shared by two paths for 10 s

