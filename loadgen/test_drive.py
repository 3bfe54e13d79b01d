"""The run's one program (drive.py), driven as loadgen/run.sh drives it: the
test asks it what to start, starts that (the real wrk runner with Debian's
wrk, against a server on 127.0.0.1), and asks again, until it says done."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import plan as runplan

DRIVE = runplan.HERE / "drive.py"


def drive(results, testid, env, rc=0):
    res = subprocess.run([sys.executable, str(DRIVE), "--run", testid, "--results", str(results), "--last-rc", str(rc)],
                         env=env, capture_output=True, text=True, timeout=60)
    return res


def loop(results, testid, env, start, most=10):
    """run.sh's loop: (exit code, what the driver said, [(service, settings)] it started)."""
    env = {**env, "TESTID": testid}  # run.sh exports it
    rc, said, started = 0, [], []
    for _ in range(most):
        res = drive(results, testid, env, rc)
        assert res.returncode == 0, res.stdout + res.stderr
        *lines, last = res.stdout.splitlines()
        said += lines
        verb, *rest = last.split()
        if verb == "done":
            return int(rest[0]), said, started
        service, *settings = rest
        settings = dict(kv.split("=", 1) for kv in settings)
        started.append((service, settings))
        rc = start(service, {**env, **settings})
    pytest.fail(f"no end after {most} steps: {started}")


def wrk_starter(service, env):
    """Starts the wrk runner as compose's wrk service runs it (WRK_LOCAL=1)."""
    assert service == "wrk", service
    res = subprocess.run([sys.executable, str(runplan.HERE / "wrk_runner.py")], env={**env, "WRK_LOCAL": "1"},
                         capture_output=True, text=True, timeout=60)
    return res.returncode


@pytest.fixture
def lab(tmp_path, local_catalogue):
    if shutil.which("wrk") is None:
        pytest.fail("wrk is not installed: scripts/test-deps.sh installs Debian's wrk")
    catalogue, _ = local_catalogue
    return {**os.environ, "CATALOGUE": str(catalogue), "RESULTS": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}


def test_precision_runs_its_second_stage_and_stops(tmp_path, lab):
    """make max GENERATOR=wrk PRECISION: the first batch, then the one more
    that its spread calls for (a target out of reach: up to MAX_ROUNDS), merged
    into load.json, then done: Stein's procedure has no third look."""
    env = {**lab, "MODE": "max", "GENERATOR": "wrk", "PATHS": "tcp-lo,uds-lo", "SCENARIO": "ping", "ROUNDS": "2",
           "DURATION": "1", "WARMUP": "0", "IDLE": "0", "PRECISION": "0.01%", "MAX_ROUNDS": "4", "SEED": "1",
           "CONNECTIONS": "2", "WRK_THREADS": "1"}
    rc, said, started = loop(tmp_path, "d1", env, wrk_starter)
    assert rc == 0, said
    assert started == [("wrk", {}), ("wrk", {"FIRST_ROUND": "3", "ROUNDS": "2", "SEED": "1"})]
    assert said[0] == "wrk run testid=d1, max throughput"
    assert said[-1] == "not met: stopped at MAX_ROUNDS=4"
    assert sorted(p.name for p in (tmp_path / "d1").iterdir()) == ["drive.json", "load.json"]
    load = json.loads((tmp_path / "d1" / "load.json").read_text())
    assert load["settings"]["rounds"] == 4 and {p["round"] for p in load["phases"]} == {1, 2, 3, 4}


def test_a_sweep_without_a_top_probes_first_then_plans_its_first_step(tmp_path, lab):
    """make sweep with neither SWEEP_RATES nor SWEEP_TO: wrk flat out for 3 s
    per path, its top 1.2x the fastest; then openloop's first step, planned up to
    it. The step writing no figures ends the run with openloop's exit code."""
    env = {**lab, "MODE": "sweep", "GENERATOR": "", "PATHS": "tcp-lo", "SCENARIO": "ping", "SEED": "1",
           "CONNECTIONS": "2", "WRK_THREADS": "1", "SWEEP_STEPS": "2", "SWEEP_FROM": "10"}

    def start(service, env):
        if service == "wrk":
            return wrk_starter(service, env)
        assert service == "openloop" and env["PLAN_FILE"] == "plan.json"
        return 7  # openloop failed before writing load.json

    rc, said, started = loop(tmp_path, "d2", env, start)
    assert rc == 7
    (probe, probe_settings), (gen, gen_settings) = started
    assert probe == "wrk" and probe_settings["TESTID"] == "d2-probe" and probe_settings["MODE"] == "max"
    fastest = json.loads((tmp_path / "d2" / "probe.json").read_text())["phases"][-1]
    top = round(1.2 * fastest["requests"] / fastest["duration_s"])
    assert gen == "openloop" and gen_settings == {"SWEEP_TO": str(top), "PLAN_FILE": "plan.json"}
    assert f"sweep: up to SWEEP_TO={top} req/s" in said and not (tmp_path / "d2-probe").exists()
    plan = json.loads((tmp_path / "d2" / "plan.json").read_text())
    assert plan["settings"]["rates"][-1] == top and plan["settings"]["step"] == 1


def test_a_bad_setting_is_named_before_anything_starts(tmp_path, lab):
    res = drive(tmp_path, "d3", {**lab, "MODE": "rate", "RATE": "abc"})
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == 'make: RATE="abc": must be a whole number >= 1'
    assert not (tmp_path / "d3").exists()


def test_a_load_run_is_its_plan_then_openloop_then_done_with_its_exit_code(tmp_path, lab):
    rc, said, started = loop(tmp_path, "d4", {**lab, "MODE": "rate", "PATHS": "tcp-lo,uds-lo", "SEED": "2"},
                             lambda service, env: 1)
    assert (rc, said, started) == (1, ["openloop run testid=d4"], [("openloop", {"PLAN_FILE": "plan.json"})])
    plan = json.loads((tmp_path / "d4" / "plan.json").read_text())
    assert plan["testid"] == "d4" and plan["settings"]["paths"] == ["tcp-lo", "uds-lo"]
