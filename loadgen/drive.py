"""The run's judge: `make load`, `make max`, `make sweep`, `make floor` and
`make k8s-load` plan, judge and decide what comes next here, and nowhere else.

loadgen/lab_run.py, the run's program on the host, asks it before the run
and after each generator it starts (on Compose in the report's image, on
Kubernetes with .venv's Python: both have what the plan and the judges
import, numpy and scipy):

    python3 loadgen/drive.py --run <testid> --results results [--last-rc N] [--backend kubernetes]

Each call reads what the run has done so far (results/<testid>/drive.json,
its own record, and the files the generators wrote), merges and judges the
last batch or step, plans the next one, prints what it has to say and
records what comes next in drive.json's "next":

    {"run": <generator>, "settings": {NAME: value, ...}, "length_s": <seconds or null>}
    {"done": <exit code>}

What a run is made of:

- a run: its plan (plan.py; openloop and k6 read plan.json, wrk's and
  oha's runners build the same plan in-process), the generator, done; on
  Kubernetes the Job's init container plans from the chart's values and
  these settings, and its pods' load.json (segments/<load file>/<pod>.json)
  are merged here;
- PRECISION: after the first batch, report/precision.py sizes one more from
  its spread (Stein's second stage), which continues the run's order of
  paths (FIRST_ROUND, ROUNDS, SEED) and is merged into its load.json;
- make sweep: without SWEEP_RATES or SWEEP_TO, a probe first (Compose only:
  every path flat out for 3 s with wrk; the top is 1.2x the fastest); then a
  step at a time, report/sweep.py judging each and naming the paths that go on;
- make floor: its plan, then the floor client (Compose only).

Which judge applies is read from what ran (load.json's settings), else from
MODE and PRECISION. A bad setting: one line naming it, exit 2, before
anything has started."""
import argparse
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import plan as runplan  # noqa: E402 (beside this file, as wrk_runner.py takes it)
from report import precision, sweep  # noqa: E402

STATE = "drive.json"
# The programs that read the plan from its file (the others build it in-process).
PLAN_FILE_READERS = ("openloop", "k6", "floor")
# make sweep's top when none is given: every path flat out for this long (wrk).
PROBE = {"MODE": "max", "GENERATOR": "wrk", "ROUNDS": 1, "DURATION": 3, "WARMUP": 1, "IDLE": 0, "PRECISION": ""}
PROBE_FACTOR = 1.2
# The probe's length at most: 8 paths x (1 s warm-up + 3 s + gaps).
PROBE_LENGTH_S = 60
KUBERNETES = "kubernetes"


class RunFailed(Exception):
    """The run cannot go on: (message, exit code)."""


def action(service, settings, length_s=None):
    """What comes next: start service with these settings (about length_s seconds)."""
    return {"run": service, "settings": {k: str(v) for k, v in settings.items()}, "length_s": length_s}


def done(rc):
    return {"done": rc}


def needs_probe(env):
    return (env.get("MODE") == "sweep" and (env.get("SWEEP") or "rate") == "rate"
            and not env.get("SWEEP_RATES") and not env.get("SWEEP_TO"))


def file_names(state):
    """(plan, load) file names of the batch or step state's settings name."""
    s = state["settings"]
    return runplan.file_names(int(s.get("FIRST_ROUND", 1)), int(s.get("SWEEP_STEP", 1)))


def generate(state, env, run_dir):
    """Plan the next batch or step with the run's settings so far and say
    which generator runs it. openloop and k6 read the plan's file; wrk's and
    oha's runners build the same plan from the same settings. On Kubernetes
    the Job's init container plans, from the chart's values and these settings."""
    state["at"] = "generate"
    if state["backend"] == KUBERNETES:
        return [], action("openloop", {**state["settings"], "PLAN_FILE": file_names(state)[0]})
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
    return lines, action(gen, out, doc["length_s"])


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


def merge_segments(state, run_dir):
    """Kubernetes: the pods' load.json of the last batch or step
    (segments/<load file>/<pod>.json, lab_run.py wrote them from their logs),
    merged exactly into that load file (loadgen/merge_segments.py)."""
    name = file_names(state)[1]
    pods = sorted((run_dir / "segments" / name).glob("*.json"), key=lambda f: int(f.stem))
    if not pods or (run_dir / name).exists():
        return
    import merge_segments as merger  # hdrh: .venv's, where Kubernetes runs this
    docs = [json.loads(f.read_text()) for f in pods]
    try:
        doc = merger.merge(docs, [str(f) for f in pods]) if len(docs) > 1 else docs[0]
    except merger.MergeError as e:
        raise RunFailed(f"make k8s-load: {e}", 2)
    (run_dir / name).write_text(json.dumps(doc, indent=2) + "\n")


def ran(env, run_dir):
    """The settings the run ran with: load.json's, else (nothing written) MODE's and PRECISION's."""
    try:
        s = json.loads((run_dir / "load.json").read_text())["settings"]
        return s.get("mode"), s.get("precision")
    except (OSError, ValueError, KeyError):
        return env.get("MODE"), env.get("PRECISION")


def judged(state, env, run_dir, lines, nxt):
    """After a judge: done, or the next batch or step (its settings, nxt) planned."""
    if nxt is None:
        return lines, done(0)
    state["settings"].update(nxt)
    more, act = generate(state, env, run_dir)
    return lines + more, act


def after_sweep_step(state, env, run_dir, rc):
    """Judge the step just run (past a path's limit more than 1% of requests
    fail, as expected: the judge says what that means); the next step or done."""
    step = int(state["settings"].get("SWEEP_STEP", 1))
    if not (run_dir / file_names(state)[1]).is_file():
        if step == 1:
            raise RunFailed(None, rc or 1)  # the generator said why
        raise RunFailed(f"make sweep: step {step} wrote no figures (above: why); the sweep stops there", 1)
    return judged(state, env, run_dir, *sweep.check(run_dir))


def after_batch(state, env, run_dir, rc):
    """PRECISION: judge the batches so far; one more (Stein's second stage) or done."""
    batch = int(state["settings"].get("FIRST_ROUND", 1)) > 1
    if rc != 0:  # a failed batch still has its figures: merged, and judged once more
        if batch and any(run_dir.glob("load-r*.json")):
            return precision.check(run_dir)[0], done(rc)
        return [], done(rc)
    return judged(state, env, run_dir, *precision.check(run_dir))


def begin(state, env, run_dir):
    """The run's first step: the sweep's probe (Compose), or its first plan."""
    if not needs_probe(env):
        return generate(state, env, run_dir)
    if state["backend"] == KUBERNETES:
        raise runplan.SettingError("make k8s-load: a sweep on Kubernetes needs SWEEP_RATES or SWEEP_TO "
                                   "(no wrk there to probe the top)")
    # A bad setting stops before the probe: the plan with stand-in rates.
    runplan.build({**env, "SWEEP_RATES": "1,2"}, runplan.read_catalogue(env))
    state["at"] = "probe"
    probe_id = f"{env['TESTID']}-probe"
    return (["sweep: finding its top, each path flat out for 3 s (wrk; SWEEP_TO or SWEEP_RATES skips this)"],
            action("wrk", {**PROBE, "TESTID": probe_id}, PROBE_LENGTH_S))


def advance(state, env, run_dir, rc):
    """(lines, what comes next) of this call; state is updated in place."""
    if state["at"] == "start":
        return begin(state, env, run_dir)
    if state["at"] == "probe":
        top = probe_top(run_dir, f"{env['TESTID']}-probe")
        state["settings"]["SWEEP_TO"] = top
        more, act = generate(state, env, run_dir)
        return [f"sweep: up to SWEEP_TO={top} req/s"] + more, act
    if state["backend"] == KUBERNETES:
        merge_segments(state, run_dir)
    mode, precise = ran(env, run_dir)
    if mode == "sweep":
        return after_sweep_step(state, env, run_dir, rc)
    if precise and mode != "floor" and (run_dir / "load.json").is_file():
        return after_batch(state, env, run_dir, rc)
    return [], done(rc)


def main(argv=None, env=os.environ):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--results", default="results")
    ap.add_argument("--last-rc", type=int, default=0, help="the exit code of the generator it last asked for")
    ap.add_argument("--backend", choices=("compose", KUBERNETES), default="compose",
                    help="where the generators run (kubernetes: the Job plans, its pods' load.json are merged here)")
    args = ap.parse_args(argv)
    env = {**env, "TESTID": args.run}
    run_dir = Path(args.results) / args.run
    record = run_dir / STATE
    state = json.loads(record.read_text()) if record.is_file() else {
        "at": "start", "started": False, "settings": {}, "backend": args.backend}
    try:
        lines, nxt = advance(state, env, run_dir, args.last_rc)
    except runplan.SettingError as e:
        print(f"make: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        msg, rc = e.args
        if msg:
            print(msg, file=sys.stderr)
        lines, nxt = [], done(rc)
    run_dir.mkdir(parents=True, exist_ok=True)
    if "done" in nxt:
        # A replay's schedule (make load TRAFFIC=): with TRAFFIC_SEND=logged it
        # holds your paths; only the plan's summary of it stays.
        (run_dir / runplan.REPLAY_FILE).unlink(missing_ok=True)
    state["next"] = nxt
    record.write_text(json.dumps(state, indent=2))
    if lines:
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
