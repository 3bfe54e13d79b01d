"""The run's judge (drive.py), asked as loadgen/lab_run.py asks it: the
test asks what to start next (drive.json's "next"), starts that (the real
wrk runner with Debian's wrk, against a server on 127.0.0.1), and asks
again, until it says done. Its exit paths (a generator failing in any batch
or step, a bad setting, PRECISION not met, a sweep's probe failing) with the
generator played by a function and the judge asked in this process.
lab_run.py itself, with its backends: test_lab_run.py."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import drive as drive_py
import plan as runplan
import wrk_runner

DRIVE = runplan.HERE / "drive.py"


def drive(results, testid, env, rc=0):
    res = subprocess.run([sys.executable, str(DRIVE), "--run", testid, "--results", str(results), "--last-rc", str(rc)],
                         env=env, capture_output=True, text=True, timeout=60)
    return res


def drive_here(results, testid, env, rc=0):
    """drive.py's main in this process (no interpreter to start: the exit paths below ask it often)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = drive_py.main(["--run", testid, "--results", str(results), "--last-rc", str(rc)], env)
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def loop(results, testid, env, start, most=10, errors=None, ask=drive):
    """lab_run.py's loop: (exit code, what the judge said, [(service, settings)] it
    started); errors, a list: what it said on stderr, line by line."""
    env = {**env, "TESTID": testid}  # lab_run.py passes it on
    rc, said, started = 0, [], []
    for _ in range(most):
        res = ask(results, testid, env, rc)
        assert res.returncode == 0, res.stdout + res.stderr
        if errors is not None:
            errors += res.stderr.splitlines()
        said += res.stdout.splitlines()
        nxt = json.loads((Path(results) / testid / drive_py.STATE).read_text())["next"]
        if "done" in nxt:
            return nxt["done"], said, started
        service, settings = nxt["run"], nxt["settings"]
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


# A stand-in generator for the exit paths below: wrk's runner run in-process
# (its plan, its load.json or load-r<N>.json) with each phase's wrk played by
# a function: path tcp-lo 1000 requests a second, uds-lo 1100, plus a round's
# own few, so the rounds spread.
def fake_wrk(service, env):
    assert service == "wrk", service

    def phase(s, ph, url):
        n = (1000 if ph["path"] == "tcp-lo" else 1100) + 7 * (ph["round"] % 3)
        w = {"duration_s": 1.0, "requests": n, "errors": 0,
             "latency_ms": {"avg": 1.0, "p50": 1.0, "p90": 1.5, "p95": 1.8, "p99": 2.0, "p999": 3.0, "max": 4.0}}
        return 1_000 * ph["round"], 1_000 * ph["round"] + 1_000, w

    return wrk_runner.run(wrk_runner.wrk_env({**env, "WRK_LOCAL": "1"}), phase)


@pytest.fixture
def quick(lab, monkeypatch):
    """The settings of a short PRECISION run of two paths, no pauses between phases."""
    monkeypatch.setattr(runplan, "GAP_SECONDS", 0)
    return {**lab, "MODE": "max", "GENERATOR": "wrk", "PATHS": "tcp-lo,uds-lo", "SCENARIO": "ping", "ROUNDS": "2",
            "DURATION": "1", "WARMUP": "0", "IDLE": "0", "PRECISION": "0.01%", "MAX_ROUNDS": "4", "SEED": "1",
            "CONNECTIONS": "2", "WRK_THREADS": "1"}


@pytest.mark.parametrize("wrote", [True, False])
def test_a_failed_later_precision_batch_ends_the_run_with_its_exit_code(tmp_path, quick, wrote):
    """The second batch's generator fails (exit 3): the run ends with 3, not
    0, whether or not it wrote its figures; what it wrote is merged and
    judged once more, and said."""
    def start(service, env):
        if env.get("FIRST_ROUND") == "3":
            if wrote:
                fake_wrk(service, env)
            return 3
        return fake_wrk(service, env)

    rc, said, started = loop(tmp_path, "f1", quick, start, ask=drive_here)
    assert rc == 3 and len(started) == 2
    rounds = {p["round"] for p in json.loads((tmp_path / "f1" / "load.json").read_text())["phases"]}
    judged = "precision after 4 rounds (target +/-0.01%):" in said
    assert (judged, rounds) == ((True, {1, 2, 3, 4}) if wrote else (False, {1, 2}))


def test_a_failed_first_precision_batch_ends_the_run_without_a_second(tmp_path, quick):
    rc, said, started = loop(tmp_path, "f2", quick, lambda service, env: fake_wrk(service, env) or 1, ask=drive_here)
    assert (rc, said, [s for s, _ in started]) == (1, ["wrk run testid=f2, max throughput"], ["wrk"])


def test_precision_met_and_not_met_both_end_in_0_and_say_which(tmp_path, quick):
    rc, said, started = loop(tmp_path, "f3", {**quick, "PRECISION": "50%"}, fake_wrk, ask=drive_here)
    assert (rc, said[-1], len(started)) == (0, "met", 1)
    rc, said, started = loop(tmp_path, "f4", quick, fake_wrk, ask=drive_here)
    assert (rc, said[-1], len(started)) == (0, "not met: stopped at MAX_ROUNDS=4", 2)
    assert said.count("wrk run testid=f4, max throughput") == 1  # said once, at the start
    assert json.loads((tmp_path / "f4" / "load.json").read_text())["precision"]["met"] is False


def test_a_sweeps_probe_that_fails_ends_the_run_saying_what_to_give(tmp_path, lab):
    env = {**lab, "MODE": "sweep", "GENERATOR": "", "PATHS": "tcp-lo", "SCENARIO": "ping", "SEED": "1"}
    errors = []
    rc, said, started = loop(tmp_path, "f5", env, lambda service, env: 1, errors=errors, ask=drive_here)
    assert rc == 1 and [s for s, _ in started] == ["wrk"]
    assert errors == ["make sweep: the probe failed (above); give SWEEP_TO or SWEEP_RATES"]


def test_a_bad_sweep_setting_is_named_before_the_probe(tmp_path, lab):
    res = drive_here(tmp_path, "f6", {**lab, "MODE": "sweep", "PATHS": "tcp-lo", "SCENARIO": "ping,cpu", "TESTID": "f6"})
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == "make: SCENARIO=ping,cpu: make sweep takes one workload (a sweep each)"


def fake_openloop(steps_failing):
    """openloop played by a function: each step's measured phases at their
    rate, no failure; a step in steps_failing: (exit code, whether it wrote its figures)."""
    def start(service, env):
        assert service == "openloop", service
        run_dir = Path(env["RESULTS"]) / env["TESTID"]
        plan = json.loads((run_dir / env["PLAN_FILE"]).read_text())
        step = plan["settings"]["step"]
        rc, wrote = steps_failing.get(step, (0, True))
        if wrote:
            phases = [{**{k: v for k, v in p.items() if k not in ("url", "urls", "progress")}, "requests": p["rate"] * 5,
                       "duration_s": 5, "failed_rate": 0.0, "dropped_iterations": 0,
                       "duration_ms": {"avg": 1.0, "p50": 1.0 + 0.01 * p["round"], "p90": 1.5, "p95": 1.8, "p99": 2.0,
                                       "p999": 3.0, "max": 4.0}, "statuses": {"502": 0, "503": 0, "504": 0, "0": 0}}
                      for p in plan["phases"]]
            load = {"testid": plan["testid"], "urls": plan["urls"], "start_ms": 1_000 * step, "gap_s": 1, "idle": None,
                    "settings": plan["settings"], "phases": phases, "totals": {"requests": 1, "failed_rate": 0},
                    "thresholds_failed": []}
            (run_dir / runplan.file_names(1, step)[1]).write_text(json.dumps(load))
        return rc
    return start


SWEEP = {"MODE": "sweep", "GENERATOR": "openloop", "PATHS": "tcp-lo,uds-lo", "SCENARIO": "ping", "SEED": "1",
         "SWEEP_RATES": "10,20,30", "SWEEP_ROUNDS": "2", "INTERLEAVE": "0", "WARMUP": "0", "DURATION": "5"}


def test_a_sweep_step_that_writes_no_figures_stops_the_sweep_there(tmp_path, lab):
    errors = []
    rc, said, started = loop(tmp_path, "f7", {**lab, **SWEEP}, fake_openloop({2: (5, False)}), errors=errors, ask=drive_here)
    assert rc == 1 and [s.get("SWEEP_STEP") for _, s in started] == [None, "2"]
    assert errors == ["make sweep: step 2 wrote no figures (above: why); the sweep stops there"]


def test_a_sweep_step_that_fails_with_its_figures_is_judged_and_the_sweep_goes_on(tmp_path, lab):
    """Past a path's limit a step's generator fails (more than 1% of its
    requests): its figures are judged, and the sweep goes on to its last step."""
    rc, said, started = loop(tmp_path, "f8", {**lab, **SWEEP}, fake_openloop({2: (1, True)}), ask=drive_here)
    assert rc == 0 and [s.get("SWEEP_STEP") for _, s in started] == [None, "2", "3"]
    assert "sweep step 3/3 at 30 req/s:" in said


def test_a_sweeps_top_is_from_the_probes_measured_phases_not_its_warm_up(tmp_path):
    """1.2x the fastest measured path's requests/s; the probe's warm-up (round 0),
    faster here, is not a measurement. The probe's load.json is kept as probe.json."""
    probe = tmp_path / "s1-probe"
    probe.mkdir()
    phases = [{"round": 0, "requests": 9000, "duration_s": 1}, {"round": 1, "requests": 3000, "duration_s": 3},
              {"round": 1, "requests": 3600, "duration_s": 3}]
    (probe / "load.json").write_text(json.dumps({"phases": phases}))
    assert drive_py.probe_top(tmp_path / "s1", "s1-probe") == 1440
    assert not probe.exists() and json.loads((tmp_path / "s1" / "probe.json").read_text())["phases"] == phases
