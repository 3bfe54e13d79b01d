#!/usr/bin/env python3
"""`make max GENERATOR=wrk`: each path's throughput limit, measured by wrk inside
the lab's network, in the plan k6 runs (plan.py's build(): a warm-up per
path, then rounds of all paths in a counterbalanced order, one at a time). Writes
results/<TESTID>/load.json (shape: load.schema.json), naming wrk as the
generator of every figure.

Settings from the environment (.env, your shell or make's command line):
SCENARIO, PATHS, DURATION, ROUNDS, WARMUP, IDLE, SEED, PRECISION, MAX_ROUNDS, FIRST_ROUND,
CONNECTIONS, WRK_THREADS, TESTID,
CPU_ITERATIONS, SLEEP_MS, ENDPOINT; CATALOGUE and RESULTS (tests) name another
catalogue.json and results folder. `make max` runs this script inside the wrk
container (compose.yaml's wrk service sets WRK_LOCAL=1): each phase runs wrk
right here. Without WRK_LOCAL (bench_wrk.py, on the host) each phase is a
`$COMPOSE run` of the wrk service; COMPOSE is the compose command.
Exit 0, 1 when more than 1% of the requests failed (as k6's threshold), 2 on a
bad setting.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import plan as runplan

ROOT = runplan.ROOT
# wrk's Lua script that prints its summary as JSON, beside this file (the wrk
# service mounts loadgen/ at /lab/loadgen).
SUMMARY_LUA = runplan.HERE / "wrk" / "summary.lua"


def wrk_env(env):
    """The environment as the plan reads it for wrk: flat out (make max, or a
    sweep of connections), named wrk."""
    mode = "sweep" if env.get("MODE") == "sweep" else "max"
    return {"TESTID": f"run-{int(time.time())}", **env, "MODE": mode, "GENERATOR": "wrk"}


def parse_output(out):
    """wrk's output as our summary.lua and the start/end stamps frame it."""
    lines = out.strip().splitlines()
    stamps = [int(x) for x in lines if re.fullmatch(r"[0-9]{13}", x.strip())]
    summary = next((json.loads(x)["wrk_summary"] for x in lines if x.startswith('{"wrk_summary"')), None)
    if len(stamps) != 2 or summary is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    return stamps[0], stamps[1], summary


def run_phase(compose, s, url, phase):
    script = (
        f"date +%s%3N; wrk --script {shlex.quote(str(SUMMARY_LUA.relative_to(ROOT)))} -t{s['threads']} "
        f"-c{phase.get('connections', s['connections'])} -d{phase['duration_s']}s --latency {shlex.quote(url)}; date +%s%3N"
    )
    if compose is None:  # inside the wrk container, or a test on the host
        cmd = ["sh", "-c", script]
    else:
        cmd = compose + ["--profile", "load", "run", "--rm", "-T", "--entrypoint", "sh", "wrk", "-c", script]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return parse_output(res.stdout)


def record(phase, start, t0, w):
    """A phase of load.json from wrk's summary; its start as measured."""
    lat = w["latency_ms"]
    phase.update({
        "start_offset_s": round((start - t0) / 1000, 3),
        "duration_s": round(w["duration_s"], 3),
        "requests": w["requests"],
        "failed_rate": w["errors"] / w["requests"] if w["requests"] else 0,
        "dropped_iterations": 0,
        "duration_ms": {k: lat[k] for k in ("avg", "p50", "p90", "p95", "p99", "p999", "max") if lat.get(k) is not None},
    })
    if phase.get("step"):  # a sweep: how the path failed, by wrk's kinds of error
        phase["statuses"] = {"non_2xx_3xx": w["non_2xx_3xx"], **w["by_kind"]}


def main():
    env = wrk_env(os.environ)
    compose = None if env.get("WRK_LOCAL") == "1" else shlex.split(runplan.setting(env, "COMPOSE", "docker compose"))
    return run(env, lambda s, ph, url: run_phase(compose, s, url, ph))


def run(env, phase_runner):
    """The whole plan, flat out, phase by phase: phase_runner(settings, phase,
    url) runs one and returns (start ms, end ms, summary as summary.lua prints
    it); writes load.json (or a batch's, or a sweep step's). Shared by wrk and
    oha (loadgen/oha_runner.py)."""
    gen = env["GENERATOR"]
    try:
        doc = runplan.build(env, runplan.read_catalogue(env))
    except runplan.SettingError as e:
        print(f"make: {e}", file=sys.stderr)
        return 2
    testid, s, phases = doc["testid"], doc["settings"], doc["phases"]
    what = "" if "step" in s else f"max throughput, {s['connections']} connections; "
    print(f"uds-lab {gen} run {testid}: {what}{doc['describe']}\n")
    print(f"{'phase':28} {'requests':>9} {'req/s':>9} {'errors':>7} {'p50':>10} {'p99':>10}")
    # The run starts with the idle phase (no requests), when there is one: the
    # phases' offsets then count from its start, as k6's do.
    t0 = None
    idle = doc["idle"]
    if idle is not None:
        print(f"idle {idle['duration_s']} s: no requests (the host's background, for the report)", flush=True)
        t0 = int(time.time() * 1000)
        time.sleep(idle["duration_s"])
    for i, ph in enumerate(phases):
        if i > 0 or idle is not None:
            time.sleep(runplan.GAP_SECONDS)
        print(ph.pop("progress"), flush=True)
        start, _, w = phase_runner(s, ph, ph.pop("url"))
        t0 = t0 if t0 is not None else start
        record(ph, start, t0, w)
        lat = w["latency_ms"]
        print(f"{ph['name']:28} {w['requests']:9d} {w['requests'] / w['duration_s']:9.0f} {w['errors']:7d} "
              f"{lat['p50']:9.3f}ms {lat['p99']:9.3f}ms", flush=True)
    measured = [p for p in phases if p["round"] > 0]
    requests = sum(p["requests"] for p in measured)
    failed = sum(p["failed_rate"] * p["requests"] for p in measured)
    out = {
        "testid": testid, "urls": doc["urls"], "start_ms": t0, "gap_s": doc["gap_s"],
        "idle": idle, "settings": s, "phases": phases,
        "totals": {"requests": requests, "failed_rate": failed / requests if requests else 0},
        "thresholds_failed": ["http_req_failed"] if requests and failed / requests >= 0.01 else [],
    }
    # load.json, or load-r<N>.json for a later batch of a PRECISION run, load-s<N>.json
    # for a sweep's later step (loadgen/drive.py merges them).
    name = runplan.file_names(doc["first_round"], s.get("step", 1))[1]
    path = Path(runplan.setting(env, "RESULTS", str(ROOT / "results"))) / testid / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    # Like k6's thresholds: a run with more than 1% errors fails.
    return 1 if out["thresholds_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
