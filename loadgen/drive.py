"""The run's one program: `make load`, `make max`, `make sweep` and `make
floor` plan, judge and decide what comes next here, and nowhere else.

loadgen/run.sh calls it (in the report's image: Python with scipy, so the
host needs none) before the run and after each generator it starts:

    python3 loadgen/drive.py --run <testid> --results results [--last-rc N]

Each call reads what the run has done so far (results/<testid>/drive.json,
its own record, and the files the generators wrote), merges and judges the
last batch or step, writes the plan of the next one, and prints what it has
to say, then one last line, the next step:

    run <service> NAME=value ...    start this compose service with these settings
    done <exit code>                the run is over

Only the starting is left to run.sh: each generator is a container of its
own (its CPU set, network namespace and group: compose.yaml's), and a
program in a container could start others only with the Docker socket,
which is root on the host. What a run is made of:

- a run: its plan (plan.py; openloop and k6 read plan.json, wrk's and
  oha's runners build the same plan in-process), the generator, done;
- PRECISION: after the first batch, report/precision.py sizes one more from
  its spread (Stein's second stage), which continues the run's order of
  paths (FIRST_ROUND, ROUNDS, SEED) and is merged into its load.json;
- make sweep: without SWEEP_RATES or SWEEP_TO, a probe first (every path
  flat out for 3 s with wrk; the top is 1.2x the fastest); then a step at a
  time, report/sweep.py judging each and naming the paths that go on;
- make floor: its plan, then the floor client.

A bad setting: one line naming it, exit 2, before anything has started."""
import argparse
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import plan as runplan  # noqa: E402 (beside this file, as wrk_runner.py takes it)
import replay  # noqa: E402
from report import precision, sweep  # noqa: E402

STATE = "drive.json"
# The programs that read the plan from its file (the others build it in-process).
PLAN_FILE_READERS = ("openloop", "k6", "floor")
# make sweep's top when none is given: every path flat out for this long (wrk).
PROBE = {"MODE": "max", "GENERATOR": "wrk", "ROUNDS": 1, "DURATION": 3, "WARMUP": 1, "IDLE": 0, "PRECISION": ""}
PROBE_FACTOR = 1.2


class RunFailed(Exception):
    """The run cannot go on: (message, exit code)."""


def action(service, settings):
    """The last line: start service with these settings."""
    return "run " + " ".join([service] + [f"{k}={v}" for k, v in settings.items()])


def needs_probe(env):
    return (env.get("MODE") == "sweep" and (env.get("SWEEP") or "rate") == "rate"
            and not env.get("SWEEP_RATES") and not env.get("SWEEP_TO"))


def generate(state, env, run_dir):
    """Plan the next batch or step with the run's settings so far and say
    which generator runs it. openloop and k6 read the plan's file; wrk's and
    oha's runners build the same plan from the same settings."""
    settings = {**env, **{k: str(v) for k, v in state["settings"].items()}}
    catalogue = runplan.read_catalogue(settings)
    floor = env.get("MODE") == "floor"
    doc = runplan.floor_build(settings, catalogue) if floor else runplan.build(settings, catalogue, run_dir)
    gen = "floor" if floor else doc["settings"]["generator"]
    out = dict(state["settings"])
    if gen in PLAN_FILE_READERS:
        name = runplan.file_names(doc["first_round"], doc["settings"].get("step", 1))[0]
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text(json.dumps(doc, indent=2))
        out["PLAN_FILE"] = name
    lines = []
    if not state["started"]:
        state["started"] = True
        lines.append(f"{gen} run testid={doc['testid']}{', max throughput' if env.get('MODE') == 'max' else ''}")
    state["at"] = "generate"
    return lines, action(gen, out)


def probe_top(run_dir, probe_id):
    """1.2x the fastest path's requests/s in the probe's run, kept as probe.json."""
    probe_dir = run_dir.parent / probe_id
    try:
        load = json.loads((probe_dir / "load.json").read_text())
    except (OSError, ValueError):
        raise RunFailed("make sweep: the probe failed (above); give SWEEP_TO or SWEEP_RATES", 1)
    top = round(PROBE_FACTOR * max(p["requests"] / p["duration_s"] for p in load["phases"] if p["round"] > 0))
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.move(str(probe_dir / "load.json"), run_dir / "probe.json")
    shutil.rmtree(probe_dir, ignore_errors=True)
    return top


def judged(state, env, run_dir, lines, nxt):
    """After a judge: done, or the next batch or step (its settings, nxt) planned."""
    if nxt is None:
        return lines, "done 0"
    state["settings"].update(nxt)
    more, act = generate(state, env, run_dir)
    return lines + more, act


def after_sweep_step(state, env, run_dir, rc):
    """Judge the step just run (past a path's limit more than 1% of requests
    fail, as expected: the judge says what that means); the next step or done."""
    step = int(state["settings"].get("SWEEP_STEP", 1))
    wrote = run_dir / ("load.json" if step == 1 else runplan.file_names(1, step)[1])
    if not wrote.is_file():
        if step == 1:
            raise RunFailed(None, rc or 1)  # the generator said why
        raise RunFailed(f"make sweep: step {step} wrote no figures (above: why); the sweep stops there", 1)
    return judged(state, env, run_dir, *sweep.check(run_dir))


def after_batch(state, env, run_dir, rc):
    """PRECISION: judge the batches so far; one more (Stein's second stage) or done."""
    batch = int(state["settings"].get("FIRST_ROUND", 1)) > 1
    if rc != 0:  # a failed batch still has its figures: merged, and judged once more
        if batch and any(run_dir.glob("load-r*.json")):
            return precision.check(run_dir)[0], f"done {rc}"
        return [], f"done {rc}"
    return judged(state, env, run_dir, *precision.check(run_dir))


def advance(state, env, run_dir, rc):
    """(lines, last line) of this call; state is updated in place."""
    if state["at"] == "start":
        if needs_probe(env):
            # A bad setting stops before the probe: the plan with stand-in rates.
            runplan.build({**env, "SWEEP_RATES": "1,2"}, runplan.read_catalogue(env))
            state["at"] = "probe"
            probe_id = f"{env['TESTID']}-probe"
            return (["sweep: finding its top, each path flat out for 3 s (wrk; SWEEP_TO or SWEEP_RATES skips this)"],
                    action("wrk", {**PROBE, "TESTID": probe_id}))
        return generate(state, env, run_dir)
    if state["at"] == "probe":
        top = probe_top(run_dir, f"{env['TESTID']}-probe")
        state["settings"]["SWEEP_TO"] = top
        more, act = generate(state, env, run_dir)
        return [f"sweep: up to SWEEP_TO={top} req/s"] + more, act
    if env.get("MODE") == "sweep":
        return after_sweep_step(state, env, run_dir, rc)
    if env.get("PRECISION") and env.get("MODE") != "floor" and (run_dir / "load.json").is_file():
        return after_batch(state, env, run_dir, rc)
    return [], f"done {rc}"


def main(argv=None, env=os.environ):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--results", default="results")
    ap.add_argument("--last-rc", type=int, default=0, help="the exit code of the service it last asked for")
    args = ap.parse_args(argv)
    env = {**env, "TESTID": args.run}
    run_dir = Path(args.results) / args.run
    record = run_dir / STATE
    state = json.loads(record.read_text()) if record.is_file() else {"at": "start", "started": False, "settings": {}}
    try:
        lines, last = advance(state, env, run_dir, args.last_rc)
    except runplan.SettingError as e:
        print(f"make: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        msg, rc = e.args
        if msg:
            print(msg, file=sys.stderr)
        lines, last = [], f"done {rc}"
    run_dir.mkdir(parents=True, exist_ok=True)
    if last.startswith("done"):
        # A replay's schedule (make load TRAFFIC=): with TRAFFIC_SEND=logged it
        # holds your paths; only the plan's summary of it stays.
        (run_dir / replay.REPLAY_FILE).unlink(missing_ok=True)
    record.write_text(json.dumps(state, indent=2))
    print("\n".join(lines + [last]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
