"""loadgen/load.js run by the real k6 (the version in .env's K6_IMAGE, built by
scripts/test-deps.sh): its plan is plan.py's, phase for phase (read with
`k6 inspect`, no load), and a one-second run against a server on 127.0.0.1
writes a load.json of load.schema.json's shape, saying its length first and
each phase as it starts."""
import json
import os
import re
import subprocess

import jsonschema
import pytest

import plan as runplan

SCRIPT = runplan.HERE / "load.js"
CATALOGUE = runplan.read_catalogue({})


@pytest.fixture(scope="module")
def k6():
    """The k6 binary: test-deps.sh prints its cached path (and builds it if missing)."""
    res = subprocess.run([str(runplan.ROOT / "scripts" / "test-deps.sh"), "k6"], capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()[-1]


# What load.js reads: a value in the test's own environment must not reach it.
SETTINGS = {"MODE", "SCENARIO", "PATHS", "RATE", "DURATION", "ROUNDS", "WARMUP", "IDLE", "CONNECTIONS", "ENDPOINT",
            "CPU_ITERATIONS", "SLEEP_MS", "TESTID", "CATALOGUE", "RESULTS"}


def k6_env(**settings):
    env = {k: v for k, v in os.environ.items() if not k.startswith("K6_") and k not in SETTINGS}
    # Nothing leaves the machine: no usage report.
    return {**env, "K6_NO_USAGE_REPORT": "true", **{k: str(v) for k, v in settings.items()}}


def seconds(go_duration):
    """k6 prints durations as Go does: "1m18s" -> 78."""
    m = re.fullmatch(r"(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9.]+)s)?", go_duration)
    assert m and go_duration, go_duration
    h, mi, sec = m.groups()
    return int(h or 0) * 3600 + int(mi or 0) * 60 + float(sec or 0)


def python_plan(env):
    s = runplan.read_settings(env, CATALOGUE)
    return s, runplan.plan(s, runplan.routes(CATALOGUE["workloads"], s))


@pytest.mark.parametrize("settings", [
    {},  # .env's defaults are the script's defaults, but for PATHS (all the catalogue's)
    {"SCENARIO": "ping,bytes-1k,cpu", "PATHS": "uds,tcp", "ROUNDS": "2", "WARMUP": "0", "DURATION": "7",
     "CPU_ITERATIONS": "12", "IDLE": "0"},
    {"MODE": "max", "SCENARIO": "custom", "ENDPOINT": "/mine", "PATHS": "tcp-lo-ka", "ROUNDS": "1", "WARMUP": "3",
     "IDLE": "4"},
])
def test_k6s_plan_is_plan_py(k6, settings):
    res = subprocess.run([k6, "inspect", "--include-system-env-vars", str(SCRIPT)], env=k6_env(CATALOGUE=runplan.ROOT / "catalogue.json", **settings),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    scenarios = json.loads(res.stdout)["scenarios"]
    s, phases = python_plan(settings)
    urls = runplan.urls(CATALOGUE)
    assert sorted(scenarios) == sorted(p["name"] for p in phases)
    for i, p in enumerate(phases):
        sc = scenarios[p["name"]]
        assert (seconds(sc["startTime"]), seconds(sc["duration"])) == (p["start_offset_s"], p["duration_s"]), sc
        assert sc["tags"] == {"path": p["path"], "workload": p["workload"], "round": str(p["round"]), "phase": p["phase"]}
        assert sc["env"]["LAB_URL"] == urls[p["path"]] + p["endpoint"]
        assert sc["env"]["LAB_PROGRESS"] == runplan.progress(phases, i)
        want = "constant-vus" if settings.get("MODE") == "max" else "constant-arrival-rate"
        assert sc["executor"] == want


@pytest.mark.parametrize("mode", ["rate", "max"])
def test_k6_writes_a_load_json_of_the_schemas_shape(k6, tmp_path, local_catalogue, mode):
    catalogue, hits = local_catalogue
    settings = {"MODE": mode, "SCENARIO": "bytes-100", "PATHS": "uds-ka", "ROUNDS": "1", "WARMUP": "0",
                "DURATION": "1", "RATE": "20", "CONNECTIONS": "2", "TESTID": "k1", "IDLE": "1"}
    (tmp_path / "k1").mkdir()
    res = subprocess.run([k6, "run", "--quiet", "--no-color", str(SCRIPT)],
                         env=k6_env(CATALOGUE=catalogue, RESULTS=tmp_path, **settings),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    s, phases = python_plan(settings)
    assert f"uds-lab k6 run k1: {runplan.describe(s, phases)}" in res.stderr, res.stderr
    assert runplan.progress(phases, 0) in res.stderr
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    stats = ("requests", "failed_rate", "dropped_iterations", "duration_ms")
    assert [{k: v for k, v in p.items() if k not in stats} for p in load["phases"]] == phases
    (ph,) = load["phases"]
    assert ph["requests"] > 0 and ph["failed_rate"] == 0 and hits["/uds-ka/bytes/100"] >= ph["requests"]
    assert load["settings"]["mode"] == mode and load["settings"]["generator"] == "k6"
    assert load["gap_s"] == runplan.GAP_SECONDS
    assert load["idle"] == runplan.idle_window(s) == {"start_offset_s": 0, "duration_s": 1}
    assert load["settings"]["idle"] == 1


@pytest.mark.parametrize("idle", ["-1", "x", "1.5"])
def test_k6_refuses_a_bad_idle(k6, idle):
    res = subprocess.run([k6, "inspect", "--include-system-env-vars", str(SCRIPT)],
                         env=k6_env(CATALOGUE=runplan.ROOT / "catalogue.json", IDLE=idle),
                         capture_output=True, text=True, timeout=60)
    said = (res.stdout + res.stderr).replace('\\"', '"')  # k6 logs the message with its quotes escaped
    assert res.returncode != 0 and f'IDLE="{idle}": must be a whole number >= 0' in said, said
