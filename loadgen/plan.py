"""The run plan, the one definition of it: which phases a run has, in which
order, named how, and what a run says of its length and progress. Every
generator runs the same plan: the wrk and oha runners build it here
in-process; for openloop (and k6) the run's program (loadgen/drive.py)
writes it to results/<TESTID>/plan.json, and loadgen/openloop (or
loadgen/load.js) reads it.

First an idle phase (IDLE seconds, no requests, skipped when IDLE=0): the
report measures the host's background there (its context switches per
second) and subtracts it from each phase. Then for each workload (SCENARIO,
in order): make load's interleaved streams (INTERLEAVE seconds, one per
connection handling, plan_orders.streams: every path once in each cycle, in
an order drawn from SEED and the cycle), each after WARMUP seconds of its
own; then ROUNDS rounds of every path, one path at a time (DURATION seconds
each, GAP_SECONDS apart; INTERLEAVE=0 and make max warm each path up first,
round 0). A phase is named `<workload>__<path>__r<round>` (the stream's path
is `mix`). Paths and workloads come from catalogue.json.

The rounds' order (plan_orders.paired_orders): each compared pair's two
paths back to back, the pairs in an order drawn anew each round from SEED,
which of a pair goes first alternating by round, so that drift falls on
both alike and a comparison never spans more than its own two phases. SEED
is recorded in the plan, so a run's order can be repeated.

PRECISION (a percentage) asks for more rounds until every comparison of the
answer is known to within it (loadgen/drive.py runs the batches, report/precision.py
judges them), up to MAX_ROUNDS. A batch after the first is planned here too,
from FIRST_ROUND on: the same order sequence continued, no idle phase, no
warm-up (the lab is warm: a batch follows the last one after a few seconds).

MODE=sweep (make sweep) plans one step at a time (SWEEP_STEP, loadgen/drive.py
runs them in turn): every path still in the sweep at the step's rate (openloop), or
flat out at its connections (SWEEP=connections, wrk), SWEEP_ROUNDS rounds in a
counterbalanced order; the run's idle and warm-up phases in its first step
only. Phases are named `<workload>__<path>__s<step>__r<round>`.

load.schema.json is the shape of the load.json the generators write.

The plan's pieces, each a module beside this one: plan_env.py (a setting
read and checked), plan_settings.py (the run's settings), plan_orders.py (the
paths' order and streams), plan_words.py (the plan in words) and plan_floor.py
(make floor's plan). Their public names are importable from here too.
"""
import json
import math
import os
import re
import sys
from pathlib import Path

from plan_env import (  # noqa: F401 (plan's names, as its importers take them)
    DOTENV, FROM_ENV, SettingError, choices, dotenv, first_round, one_of, percent, read_testid, rising, setting,
    whole)
from plan_floor import FLOOR_CONNECTS, floor_build, floor_settings, sizes  # noqa: F401
from plan_orders import MIX, orders, pair_units, paired_orders, streams, williams  # noqa: F401
from plan_settings import (  # noqa: F401
    DEFAULT_GENERATOR, MIN_BLOCKS, MODES, SWEEP_FAILS, SWEEPS, TRAFFIC_WORKLOAD, default_paths, direct_paths,
    generators, geometric, interleave_settings, read_catalogue, read_settings, replay_modules, sweep_rates,
    sweep_settings, traffic_settings)
from plan_words import STREAM_WORDS, clock, length_s, progress, run_words, step_words  # noqa: F401

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEMA = HERE / "load.schema.json"
# Pause between phases: one phase's tail (closing connections, GC) stays out of the next.
GAP_SECONDS = 1
# A replay's schedule, beside the plan (loadgen/replay.py writes it; the run deletes it when it ends).
REPLAY_FILE = "replay.tsv"
# A replay's phases name their requests' route in words (each request's target is the schedule's).
REPLAY_ENDPOINT = {"emulate": "/replay/:bytes/:us", "logged": "/:logged-path"}


def urls(catalogue):
    """Where a generator reaches each path: its nginx's URL + /<path>; a direct
    path (no nginx): the app's own URL (over its socket where the catalogue
    names one: build() puts it on the path's phases)."""
    out = {name: f"{catalogue['nginx'][p['nginx']]['url']}/{name}" for name, p in catalogue["paths"].items()}
    return {**out, **{name: p["url"] for name, p in direct_paths(catalogue).items()}}


def replayed(env, s, catalogue, run_dir):
    """Write the replay's schedule into run_dir; its summary into s["traffic"],
    and the interleaved stream's length from it (whole BLOCKs, at least
    MIN_BLOCKS). Refused: a log whose peak is above what openloop holds."""
    replay, traffic = replay_modules()
    if run_dir is None:
        raise SettingError("TRAFFIC: the replay's schedule needs the run's folder")
    files = [f.strip() for f in setting(env, "TRAFFIC", "").split(",") if f.strip()]
    n = max(len(paths) for _, paths in streams(s))
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    try:
        r = replay.replay(files, traffic.read_settings({**env, "SEED": str(s["seed"])}), replay.read_send(env),
                          replay.read_speed(env), s["rate"], n, Path(run_dir) / REPLAY_FILE)
    except traffic.TrafficError as e:
        raise SettingError(f"TRAFFIC: {e}") from None
    holds = catalogue["generators"]["openloop"]["holds_rps"]
    if r["peak_rate"] > holds:
        raise SettingError(f"TRAFFIC: the replay's peak is {r['peak_rate']:.0f} req/s ({n} paths x the log's peak "
                           f"{r['peak_rate'] / n:.0f}/s), above the {holds} req/s openloop holds on time "
                           "(catalogue.json): a slower TRAFFIC_SPEED, a TRAFFIC_SAMPLE, or fewer PATHS")
    blocks = math.ceil(r["duration_s"] / s["block"])
    if blocks < MIN_BLOCKS:
        raise SettingError(f"TRAFFIC: the replay lasts {r['duration_s']:.3g} s, under the {MIN_BLOCKS} blocks of "
                           f"BLOCK={s['block']} s an interval needs: a longer stretch (TRAFFIC_FOR), a slower "
                           "TRAFFIC_SPEED, or TRAFFIC_SPEED=rate with a lower RATE")
    s["interleave"] = blocks * s["block"]
    # Each stream replays every cycle once on each of its paths, one stream after the other.
    sizes = [len(paths) for _, paths in streams(s)]
    r.update(paths=sum(sizes), requests=r["cycles"] * sum(sizes), streams=sizes)
    s["traffic"] = r


def file_names(first, step=1):
    """(plan, load) file names of a run (first=1) or of its batch from round
    first, or of a sweep's later step."""
    if step > 1:
        return f"plan-s{step}.json", f"load-s{step}.json"
    return ("plan.json", "load.json") if first == 1 else (f"plan-r{first}.json", f"load-r{first}.json")


def routes(workloads, s):
    """The catalogue's workload routes with their {PARAMETERS} filled in."""
    params = {"CPU_ITERATIONS": s["cpu_iterations"], "SLEEP_MS": s["sleep_ms"], "ENDPOINT": s["endpoint"]}
    return {w: re.sub(r"\{([A-Z_]+)\}", lambda m: str(params[m.group(1)]), d["route"]) for w, d in workloads.items()}


def idle_window(s):
    """The idle phase load.json records (no requests: the host's background), or
    None when IDLE=0. It starts the run; the first phase follows a gap after it."""
    return {"start_offset_s": 0, "duration_s": s["idle"]} if s["idle"] > 0 else None


def plan(s, route, first=1):
    """Every phase in run order, with its planned offset from the start (after
    the idle phase and a gap, when there is one): rounds first.. first+ROUNDS-1,
    and from round 1 the warm-up first."""
    step = s.get("step")  # a sweep's step: its phases carry it and its rate
    fresh = first == 1 and (step or 1) == 1  # the run's start: idle and warm-up
    phases, at = [], (s["idle"] + GAP_SECONDS if s["idle"] > 0 and fresh else 0)
    last = first + s["rounds"] - 1
    per_round = paired_orders(s.get("pairs") or [[p] for p in s["paths"]], last, s["seed"] + (step or 1) - 1)
    # The interleaved stream: make load's, once; a sweep's at every step (its paths, its rate).
    mixed = bool(s.get("interleave")) and first == 1
    for w in s["workloads"]:
        order = []
        if mixed:  # each interleaved stream warms its paths up, then is measured
            for kind, paths in streams(s):
                order += [(MIX, 0, s["warmup"], kind, paths)] if s["warmup"] > 0 and fresh else []
                order.append((MIX, 1, s["interleave"], kind, paths))
        elif s["warmup"] > 0 and fresh:
            order += [(p, 0, s["warmup"], None, None) for p in s["paths"]]
        order += [(p, r, s["duration"], None, None) for r in range(first, last + 1) for p in per_round[r - 1]]
        for path, r, secs, kind, paths in order:
            name = f"{path}-{kind}" if kind else path
            phases.append({
                "name": f"{w}__{name}__{f's{step}__' if step else ''}r{r}", "workload": w, "path": path, "round": r,
                "phase": "warmup" if r == 0 else "measure", "endpoint": route[w],
                "start_offset_s": at, "duration_s": secs, **(step_fields(s) if step else {}),
                **({"paths": paths, "block_s": s["block"], **({"stream": kind} if kind else {})} if path == MIX else {}),
            })
            at += secs + GAP_SECONDS
    return phases


def step_fields(s):
    """What a sweep's phase carries: its step, and its rate or its connections."""
    return {"step": s["step"], **({"rate": s["rate"]} if s["sweep"] == "rate" else {"connections": s["connections"]})}


def describe(s, phases, route=None, first=1):
    """The plan's length in words, said before a run starts; with PRECISION,
    its least and its most."""
    if "step" in s:
        return step_words(s, phases, sweep_most_s(s, phases, route) if s["step"] == 1 else None)
    most = length_s(plan({**s, "rounds": s["max_rounds"]}, route)) if "precision" in s and first == 1 else None
    return run_words(s, phases, GAP_SECONDS, most, first)


def sweep_most_s(s, phases, route):
    """The longest a sweep lasts from its first step (phases): every step run,
    a few seconds between steps."""
    key = "rate" if s["sweep"] == "rate" else "connections"
    return length_s(phases) + sum(length_s(plan({**s, "step": i, key: r}, route)) + 5
                                  for i, r in enumerate(s["rates"][1:], 2))


def build(env, catalogue, run_dir=None):
    """The whole plan of a run, as plan.json holds it and both generators run it
    (TRAFFIC: with the replay's schedule written into run_dir)."""
    testid = read_testid(env)
    s = read_settings(env, catalogue)
    first = first_round(env)
    if first > 1 and "precision" not in s:
        raise SettingError(f"FIRST_ROUND={first}: only for a later batch of a PRECISION run")
    route = routes(catalogue["workloads"], s)
    if "traffic" in s:
        replayed(env, s, catalogue, run_dir)
        route[TRAFFIC_WORKLOAD] = ""  # each request's target is the schedule's
    phases = plan(s, route, first)
    where, direct = urls(catalogue), direct_paths(catalogue)
    for i, p in enumerate(phases):
        if p["path"] == MIX:  # the interleaved stream: every path's URL
            p["urls"] = {q: where[q] + p["endpoint"] for q in p["paths"]}
        else:
            p["url"] = where[p["path"]] + p["endpoint"]
        if "traffic" in s:  # each request's target comes from the schedule
            p["traffic"] = s["traffic"]["file"]
            p["endpoint"] = REPLAY_ENDPOINT[s["traffic"]["send"]]
        if direct.get(p["path"], {}).get("socket"):  # the app's socket (oha_runner.py takes it off load.json)
            p["socket"] = direct[p["path"]]["socket"]
        p["progress"] = progress(phases, i)
    return {"testid": testid, "settings": s, "urls": {p: where[p] for p in s["paths"]}, "gap_s": GAP_SECONDS,
            "idle": idle_window(s) if first == 1 and s.get("step", 1) == 1 else None, "describe": describe(s, phases, route, first),
            "length_s": length_s(phases), "first_round": first, "phases": phases}


def main(env=os.environ):
    """Writes RESULTS/<TESTID>/plan.json for openloop or k6 (MODE=floor: for make floor);
    a bad setting: one line, exit 2."""
    try:
        catalogue = read_catalogue(env)
        run_dir = Path(setting(env, "RESULTS", str(ROOT / "results"))) / read_testid(env)
        doc = floor_build(env, catalogue) if env.get("MODE") == "floor" else build(env, catalogue, run_dir)
    except SettingError as e:
        print(f"make: {e}", file=sys.stderr)
        return 2
    step = doc["settings"].get("step", 1)
    out = Path(setting(env, "RESULTS", str(ROOT / "results"))) / doc["testid"] / file_names(doc["first_round"], step)[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
