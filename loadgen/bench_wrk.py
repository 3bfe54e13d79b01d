#!/usr/bin/env python3
"""Benchmark, not a test: do the lab's figures agree with an independent tool?

With the lab up (`make up`), it runs `make max` (GENERATOR=wrk) and `make
report`, then wrk on its own against the same nginx endpoints, in the same
session and the same counterbalanced rounds, and prints each path's requests/s ratio
to tcp from the lab (the app's own request counter in Prometheus, over each
phase's window) beside wrk's (wrk's own count). They should agree within 15%;
where they do not, the table says which side was limited.

    python3 loadgen/bench_wrk.py [--generator wrk] [--rounds 3] [--duration 15]
                                 [--connections 64] [--tolerance 0.15]
Exit 0 when every path agrees, 1 when one does not; a failing `make max`,
`make report` or wrk run stops it with that command's error (a traceback).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import plan as runplan  # loadgen/plan.py: the plan
import wrk_runner  # loadgen/wrk_runner.py: one wrk phase

ROOT = runplan.ROOT
CATALOGUE = runplan.read_catalogue({})
PATHS = runplan.default_paths(CATALOGUE)


def lab_run(testid, args):
    """make max + make report; returns report.json."""
    env = {**os.environ, "GENERATOR": args.generator, "ROUNDS": str(args.rounds), "DURATION": str(args.duration),
           "WARMUP": str(args.warmup), "CONNECTIONS": str(args.connections), "SCENARIO": "ping",
           "PATHS": ",".join(PATHS)}
    for target in (["max", f"TESTID={testid}"], ["report", f"RUN={testid}"]):
        subprocess.run(["make", *target], cwd=ROOT, env=env, check=True)
    return json.loads((ROOT / "results" / testid / "report.json").read_text())


def lab_throughput(report):
    """Per path and round: the app's requests over the phase's window / its length."""
    out = {}
    for ph in report["phases"]:
        w, n = ph["window"], ph["figures"].get("app_requests")
        if w and n:
            out.setdefault(ph["path"], {})[ph["round"]] = n / (w["end_s"] - w["start_s"])
    return out


def wrk_run(args):
    """wrk on its own, same plan: per path and round, wrk's own requests/s."""
    # No idle phase: wrk's own figures need no background to subtract.
    env = wrk_runner.wrk_env({"TESTID": "bench-wrk", "DURATION": str(args.duration), "ROUNDS": str(args.rounds),
                              "WARMUP": str(args.warmup), "CONNECTIONS": str(args.connections), "IDLE": "0",
                              "PATHS": ",".join(PATHS)})
    doc = runplan.build(env, CATALOGUE)
    compose = os.environ.get("COMPOSE", "docker compose").split()
    subprocess.run(compose + ["--profile", "load", "build", "wrk"], cwd=ROOT, check=True, capture_output=True)
    out = {}
    for i, ph in enumerate(doc["phases"]):
        if i > 0:
            time.sleep(doc["gap_s"])
        print(ph["progress"], flush=True)
        _, _, w = wrk_runner.run_phase(compose, doc["settings"], ph["url"], ph)
        if ph["round"] > 0:
            out.setdefault(ph["path"], {})[ph["round"]] = w["requests"] / w["duration_s"]
    return out


def ratios(by_path):
    """Mean over rounds of path/tcp, per round."""
    tcp = by_path.get(CATALOGUE["baseline"]["path"], {})
    out = {}
    for path, rounds in by_path.items():
        rs = [v / tcp[r] for r, v in rounds.items() if tcp.get(r)]
        out[path] = sum(rs) / len(rs) if rs else None
    return out


def compare(lab, wrk, tolerance):
    """Rows: path, lab req/s, lab ratio, wrk req/s, wrk ratio, agree."""
    lab_r, wrk_r = ratios(lab), ratios(wrk)
    rows, ok = [], True
    for path in PATHS:
        lr, wr = lab_r.get(path), wrk_r.get(path)
        agree = lr is not None and wr is not None and abs(lr / wr - 1) <= tolerance
        ok = ok and agree
        mean = lambda d: sum(d.values()) / len(d) if d else None  # noqa: E731
        rows.append((path, mean(lab.get(path, {})), lr, mean(wrk.get(path, {})), wr, agree))
    return rows, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generator", choices=["wrk"], default="wrk")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--tolerance", type=float, default=0.15)
    args = ap.parse_args()
    testid = time.strftime("bench-%Y%m%d-%H%M%S")
    report = lab_run(testid, args)
    lab = lab_throughput(report)
    wrk = wrk_run(args)
    rows, ok = compare(lab, wrk, args.tolerance)
    fmt = lambda v, d=0: "n/a" if v is None else f"{v:.{d}f}"  # noqa: E731
    print(f"\nThroughput limit per path, ping, {args.connections} connections, {args.rounds} x {args.duration}s "
          f"(lab run {testid}, generator {args.generator}; then wrk alone)\n")
    print(f"| path | lab req/s ({args.generator}) | lab ratio to tcp | wrk req/s | wrk ratio to tcp | within {args.tolerance:.0%} |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for path, lrps, lr, wrps, wr, agree in rows:
        print(f"| {path} | {fmt(lrps)} | {fmt(lr, 2)} | {fmt(wrps)} | {fmt(wr, 2)} | {'yes' if agree else 'NO'} |")
    kinds = sorted({w["kind"] for w in report["warnings"]})
    if kinds:
        print(f"\nthe lab's report warned: {', '.join(kinds)} (see results/{testid}/report.md)")
    print("\nagree" if ok else "\nDISAGREE: see the warnings; a generator at its own limit gives every path the same figure")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
