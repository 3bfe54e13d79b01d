#!/usr/bin/env python3
"""The summary of `make overhead` (loadgen/overhead.sh): per path, what the
lab's observing costs (full against bare) and what the framework costs (the
Gin app against the minimal net/http app, both bare), round by round.

Reads <dir>/<setup>-r<round>/max.json (wrk flat out) and rate.json (openloop at a
fixed rate), both in load.json's format; writes <dir>/overhead.json and
overhead.md and prints the latter. Rounds pair up: round k of one setup is
compared with round k of the other, so drift between rounds cancels.
"""
import json
import re
import statistics
import sys
from pathlib import Path

# The budget: the full lab keeps at least this share of the bare pair's
# throughput on every path.
GOAL = 0.97
# (label, numerator setup, denominator setup, what it answers)
COMPARISONS = [
    ("observing", "full", "bare", "the full lab against nginx + app alone (access log off, no scrapes, no watchers)"),
    ("framework", "bare", "minimal", "the Gin app against the minimal net/http app, both bare"),
]
RUN_DIR = re.compile(r"^(full|bare|minimal)-r([0-9]+)$")


def measured(load):
    """"<workload> <path>" -> the measured phase of a one-round load.json (warm-up left out)."""
    return {f"{p['workload']} {p['path']}": p for p in load["phases"] if p["phase"] == "measure"}


def read_runs(root):
    """{setup: {round: {path: {"rps", "p50_ms", "failed_rate", "dropped"}}}} from the run folders."""
    runs = {}
    for d in sorted(Path(root).iterdir()):
        m = RUN_DIR.match(d.name)
        if not m or not d.is_dir():
            continue
        setup, rnd = m.group(1), int(m.group(2))
        try:
            limit = measured(json.loads((d / "max.json").read_text()))
            rate = measured(json.loads((d / "rate.json").read_text()))
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"{d}: unreadable measurement ({e}); run make overhead again")
        runs.setdefault(setup, {})[rnd] = {
            path: {
                "rps": ph["requests"] / ph["duration_s"],
                "p50_ms": rate[path]["duration_ms"]["p50"] if path in rate else None,
                "failed_rate": max(ph["failed_rate"], rate.get(path, {}).get("failed_rate", 0)),
                "dropped": rate.get(path, {}).get("dropped_iterations", 0),
            }
            for path, ph in limit.items()
        }
    return runs


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "rounds": len(values)}


def compare(runs, num, den):
    """Per path: the throughput ratio num/den and the p50 difference num - den (µs), per paired round."""
    out = {}
    rounds = sorted(set(runs.get(num, {})) & set(runs.get(den, {})))
    if not rounds:
        return out
    paths = [p for p in runs[num][rounds[0]] if all(p in runs[s][r] for s in (num, den) for r in rounds)]
    for path in paths:
        ratios = [runs[num][r][path]["rps"] / runs[den][r][path]["rps"] for r in rounds]
        diffs = [
            (runs[num][r][path]["p50_ms"] - runs[den][r][path]["p50_ms"]) * 1000
            for r in rounds
            if runs[num][r][path]["p50_ms"] is not None and runs[den][r][path]["p50_ms"] is not None
        ]
        out[path] = {
            "rps": {s: spread([runs[s][r][path]["rps"] for r in rounds]) for s in (num, den)},
            "ratio": spread(ratios),
            "p50_diff_us": spread(diffs) if diffs else None,
        }
    return out


def verdict_observing(ratio):
    """The full lab's share of the bare pair's throughput, judged against GOAL."""
    if ratio["min"] <= 1 <= ratio["max"] or ratio["min"] > 1:
        verdict = "no measurable cost"
        if ratio["min"] < GOAL:
            verdict += f" (but rounds as low as {ratio['min']:.0%}: too wide to confirm the budget)"
        return verdict
    if ratio["median"] >= GOAL:
        return f"costs {1 - ratio['median']:.1%}: within the {1 - GOAL:.0%} budget"
    return f"costs {1 - ratio['median']:.1%}: OVER the {1 - GOAL:.0%} budget"


def verdict_framework(ratio):
    """How much faster the minimal app is than the Gin app (bare/minimal < 1: Gin is slower)."""
    if ratio["min"] <= 1 <= ratio["max"]:
        return "no measurable difference"
    word = "fewer" if ratio["median"] < 1 else "more"
    return f"Gin serves {abs(1 - ratio['median']):.1%} {word} requests/s"


def verdict_latency(d):
    if d is None:
        return "-"
    if d["min"] <= 0 <= d["max"]:
        return "no measurable difference"
    return f"{d['median']:+.0f} µs"


def summarize(runs):
    result = {"goal_share": GOAL, "comparisons": {}}
    for label, num, den, about in COMPARISONS:
        per_path = compare(runs, num, den)
        if not per_path:
            continue
        for c in per_path.values():
            judge = verdict_observing if label == "observing" else verdict_framework
            c["verdict"] = judge(c["ratio"])
            c["latency_verdict"] = verdict_latency(c["p50_diff_us"])
        entry = {"numerator": num, "denominator": den, "about": about, "paths": per_path}
        if label == "observing":
            # Met where the median keeps the budget; confirmed where every round does.
            entry["meets_goal"] = all(c["ratio"]["median"] >= GOAL for c in per_path.values())
            entry["unconfirmed"] = [p for p, c in per_path.items() if c["ratio"]["min"] < GOAL <= c["ratio"]["median"]]
        result["comparisons"][label] = entry
    result["warnings"] = [
        f"{setup} round {r} {path}: " + ", ".join(
            ([f"{v['failed_rate']:.2%} of requests failed"] if v["failed_rate"] > 0 else [])
            + ([f"the generator dropped {v['dropped']} requests at the fixed rate"] if v["dropped"] > 0 else []))
        for setup, rounds in sorted(runs.items()) for r, paths in sorted(rounds.items())
        for path, v in paths.items() if v["failed_rate"] > 0 or v["dropped"] > 0
    ]
    return result


def fmt_range(s, fmt):
    return f"{fmt(s['median'])} ({fmt(s['min'])} to {fmt(s['max'])})"


def markdown(result, settings):
    lines = ["# What the lab costs (make overhead)", ""]
    lines.append(
        f"{settings}. Medians over paired rounds, (min to max) in brackets. Throughput: wrk flat out; "
        "latency: the generator's median at the fixed rate. A spread that includes no change reads "
        f"\"no measurable\"; the budget is {1 - GOAL:.0%} of the bare pair's throughput on every path."
    )
    for label, c in result["comparisons"].items():
        num, den = c["numerator"], c["denominator"]
        lines += ["", f"## {label.capitalize()}: {c['about']}", ""]
        if label == "observing":
            lines.append("The median keeps the budget on every path." if c["meets_goal"] else "**Over the budget on some path.**")
            if c["unconfirmed"]:
                lines.append(f"Some rounds fell below it on {', '.join(c['unconfirmed'])}: more rounds or a quieter machine to confirm.")
            lines.append("")
        lines.append(f"| workload path | {num} req/s | {den} req/s | {num}/{den} | verdict | p50 {num} - {den} (µs) | latency |")
        lines.append("|---|---|---|---|---|---|---|")
        for path, p in c["paths"].items():
            d = p["p50_diff_us"]
            lines.append(
                f"| {path} | {fmt_range(p['rps'][num], lambda v: f'{v:.0f}')} | "
                f"{fmt_range(p['rps'][den], lambda v: f'{v:.0f}')} | {fmt_range(p['ratio'], lambda v: f'{v:.3f}')} | "
                f"{p['verdict']} | {fmt_range(d, lambda v: f'{v:+.0f}') if d else '-'} | {p['latency_verdict']} |"
            )
    if result["warnings"]:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in result["warnings"]]
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2:
        print("usage: overhead.py results/<TESTID>", file=sys.stderr)
        return 2
    root = Path(argv[1])
    runs = read_runs(root)
    if len(runs) < 2:
        print(f"{root}: found setups {sorted(runs)}; need two to compare", file=sys.stderr)
        return 2
    s = json.loads(next(root.glob("*/max.json")).read_text())["settings"]
    r = json.loads(next(root.glob("*/rate.json")).read_text())["settings"]
    settings = (
        f"Paths {', '.join(s['paths'])}; wrk {s['connections']} connections for {s['duration']} s, "
        f"{r['generator']} at {r['rate']} req/s for {r['duration']} s, workload {', '.join(s['workloads'])}"
    )
    result = summarize(runs)
    result["settings"] = {"max": s, "rate": r}
    (root / "overhead.json").write_text(json.dumps(result, indent=2))
    md = markdown(result, settings)
    (root / "overhead.md").write_text(md)
    print(md)
    print(f"wrote {root}/overhead.md and overhead.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
