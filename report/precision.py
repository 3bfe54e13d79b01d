"""PRECISION: whether a run knows the answer's comparisons to within a target
yet, and how many more rounds it needs if not. loadgen/drive.py, the run's
program, calls check() between batches. It first merges any later batch
(load-r<N>.json) into load.json, then judges the figures the answer compares, from the generator's own statistics (no
Prometheus): the client median at a fixed rate, requests/s flat out. Each
comparison's 95% interval must reach +/-PRECISION% of its first path's figure
(a difference: its half-width against that path's mean; a ratio: its
half-width on the log scale). It writes the outcome into load.json
("precision", for the report) and says one line per comparison, and the
next batch's settings or that the run is done.

Stein's two-stage procedure: the first batch (ROUNDS) is the first stage;
its spread alone sets how many rounds the run needs in all, and after the
second batch there is no further look. Adding batches until the interval
happened to be narrow enough, as this did before, selects runs whose spread
came out small: their intervals were too narrow (92% coverage, 8% false
differences). The answer's intervals in such a run are Stein's
(report/stats.py's stein: the mean over every round, the spread of the first
stage), which keep 95%. report/test_precision.py holds it to that."""
import json
import math
from pathlib import Path

from report.breakdown import failed_paths, failures
from report.words import failed_phrase
from report.lab import TERMS, stood_in_for
from report.stats import diff_stats, ratio_stats, stein

# The least rounds a later batch adds: one round more moves a t-interval little.
MIN_BATCH = 2


def figure_of(phase, mode):
    """The figure the answer compares, from load.json's phase."""
    if mode == "max":
        return phase["requests"] / phase["duration_s"] if phase["duration_s"] else None
    return (phase.get("duration_ms") or {}).get("p50")


def answer_pairs(load, by_path, w):
    """The answer's terms measured in workload w (by_path: its paths), less
    those with a path past MAX_FAILED_SHARE: those get no verdict (refused())."""
    failed = failures(load, w)
    return [t for t in TERMS if t.get("answer") and all(p in by_path for p in t["paths"])
            and not stood_in_for(t, by_path.__contains__) and not failed_paths(t, failed)]


def refused(load):
    """The answer's pairs with a path past MAX_FAILED_SHARE, in make load's
    words (breakdown.failed_phrase): no verdict, so nothing to narrow."""
    out = []
    for w in dict.fromkeys(p["workload"] for p in load["phases"] if p["round"] > 0):
        failed = failures(load, w)
        said = (failed_phrase(t, failed) for t in TERMS if t.get("answer"))
        out += [f"{w}: {x}".replace("**", "") for x in said if x]
    return out


def comparisons(load, first=None):
    """The answer's comparisons in this run (a pair with a failing path left
    out: refused()): each term's interval and its half-width as a share
    (0.05 = 5%) of the first path's figure; first: the first stage's rounds
    (Stein's interval), None: every round is the first stage."""
    mode = load["settings"]["mode"]
    rounds = {}
    for p in load["phases"]:
        v = figure_of(p, mode)
        if p["round"] > 0 and v is not None:
            rounds.setdefault(p["workload"], {}).setdefault(p["path"], {})[p["round"]] = v
    out = []
    for w, by_path in rounds.items():
        for t in answer_pairs(load, by_path, w):
            a, b = t["paths"]
            if mode == "max":
                d = stein(ratio_stats(by_path[b], by_path[a]), first)
                half = None if d is None or d["lo"] is None else math.exp((math.log(d["hi"]) - math.log(d["lo"])) / 2) - 1
            else:
                d = stein(diff_stats(by_path[a], by_path[b]), first)
                half = None if d is None or d["lo"] is None or not d["a_mean"] else (d["hi"] - d["lo"]) / 2 / d["a_mean"]
            if d is not None:
                out.append({"workload": w, "term": t["key"], "pair": f"{b} against {a}", "rounds": d["rounds"],
                            "half_width": half})
    return out


def needed(comps, target):
    """The rounds the widest comparison needs to reach target: an interval
    narrows with the square root of the rounds."""
    worst = max(comps, key=lambda c: math.inf if c["half_width"] is None else c["half_width"])
    if worst["half_width"] is None:
        return math.inf
    return math.ceil(worst["rounds"] * (worst["half_width"] / target) ** 2)


def decide(comps, target, rounds, max_rounds, first=None):
    """(met, more): whether every comparison is within target, and how many
    rounds the next batch adds (0: stop: met, at MAX_ROUNDS, or the second
    stage run). first: the first stage's rounds, None at the first look."""
    if not comps:
        return False, 0  # nothing to judge: the answer has no pair in PATHS
    met = all(c["half_width"] is not None and c["half_width"] <= target for c in comps)
    if met or rounds >= max_rounds or (first is not None and rounds > first):
        return met, 0
    want = needed(comps, target)
    return False, int(min(max_rounds - rounds, max(MIN_BATCH, want - rounds)))


def merge(run_dir, kind="r"):
    """Appends each later batch (load-r<N>.json, in round order; kind "s": a
    sweep's later steps, load-s<N>.json) to load.json: its phases placed in
    time from the run's start, the totals summed (a batch's rounds too); the
    batch's files are removed once merged."""
    main_path = run_dir / "load.json"
    load = json.loads(main_path.read_text())
    batches = sorted(run_dir.glob(f"load-{kind}*.json"), key=lambda p: int(p.stem.removeprefix(f"load-{kind}")))
    for path in batches:
        more = json.loads(path.read_text())
        shift = (more["start_ms"] - load["start_ms"]) / 1000
        for p in more["phases"]:
            load["phases"].append({**p, "start_offset_s": round(p["start_offset_s"] + shift, 3)})
        if kind == "r":
            load["settings"]["rounds"] += more["settings"]["rounds"]
        n0, n1 = load["totals"]["requests"], more["totals"]["requests"]
        failed = n0 * load["totals"]["failed_rate"] + n1 * more["totals"]["failed_rate"]
        load["totals"] = {"requests": n0 + n1, "failed_rate": failed / (n0 + n1) if n0 + n1 else 0}
        load["thresholds_failed"] = sorted(set(load["thresholds_failed"]) | set(more["thresholds_failed"]))
        main_path.write_text(json.dumps(load, indent=2))
        path.unlink()
        (run_dir / path.name.replace("load-", "plan-")).unlink(missing_ok=True)
    return load


def check(run_dir):
    """Merge, judge, record: (the lines to print, the next batch's settings or
    None when the run is done)."""
    before = json.loads((run_dir / "load.json").read_text()).get("precision")
    load = merge(run_dir)
    s = load["settings"]
    target = s["precision"] / 100
    # The first look is at the first stage's end; a later one reads it from load.json.
    first = (before or {}).get("first_stage_rounds") or s["rounds"]
    comps = comparisons(load, first)
    met, more = decide(comps, target, s["rounds"], s["max_rounds"], first if before else None)
    load["precision"] = {"target_pct": s["precision"], "met": met, "rounds": s["rounds"],
                         "max_rounds": s["max_rounds"], "first_stage_rounds": first, "comparisons": comps}
    (run_dir / "load.json").write_text(json.dumps(load, indent=2))
    lines = [f"precision after {s['rounds']} rounds (target +/-{s['precision']:g}%):"]
    for c in comps:
        w = "no interval" if c["half_width"] is None else f"+/-{c['half_width']:.1%}"
        lines.append(f"  {c['workload']}: {c['pair']}: {w}")
    lines += [f"  {x}" for x in refused(load)]
    if not comps and not refused(load):
        lines.append("  no comparison of the answer in PATHS: nothing to make precise")
    if more:
        return lines, {"FIRST_ROUND": s["rounds"] + 1, "ROUNDS": more, "SEED": s["seed"]}
    lines.append("met" if met else f"not met: stopped at MAX_ROUNDS={s['max_rounds']}" if comps else "not met")
    return lines, None
