#!/usr/bin/env python3
"""`make max GENERATOR=wrk`: each path's throughput limit, measured by wrk inside
the lab's network, in the same plan as k6's (a warm-up per path, then rounds of
all paths in turn, one path at a time). Writes results/<TESTID>/load.json in the
format `make report` reads, naming wrk as the generator of every figure.

Settings from the environment (.env, your shell or make's command line):
SCENARIO, PATHS, DURATION, ROUNDS, WARMUP, CONNECTIONS, WRK_THREADS, TESTID,
CPU_ITERATIONS, SLEEP_MS, ENDPOINT. `make max` runs this script inside the wrk
container (compose.yaml's wrk service sets WRK_LOCAL=1): each phase runs wrk
right here. Without WRK_LOCAL (scripts/bench_wrk.py, on the host) each phase is
a `$COMPOSE run` of the wrk service; COMPOSE is the compose command.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The paths, their nginx's URLs and the workloads, as k6/load.js reads them.
CATALOGUE = json.loads((ROOT / "catalogue.json").read_text())
KNOWN_PATHS = list(CATALOGUE["paths"])
URLS = {name: f"{CATALOGUE['nginx'][p['nginx']]['url']}/{name}" for name, p in CATALOGUE["paths"].items()}
GAP_SECONDS = 2  # as k6/load.js: one phase's tail stays out of the next


class SettingError(Exception):
    pass


def setting(env, name, default):
    v = env.get(name, "")
    return default if v == "" else v


def whole(env, name, default, minimum):
    raw = setting(env, name, str(default))
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < minimum:
        raise SettingError(f'{name}="{raw}": must be a whole number >= {minimum}')
    return int(raw)


def choices(env, name, default, known):
    items = [s.strip() for s in setting(env, name, default).split(",") if s.strip()]
    if not items:
        raise SettingError(f"{name}: empty")
    for item in items:
        if item not in known:
            raise SettingError(f'{name}: unknown "{item}" (known: {", ".join(known)})')
    return items


def read_settings(env, workloads):
    s = {
        "mode": "max",
        "generator": "wrk",
        "workloads": choices(env, "SCENARIO", "ping", list(workloads)),
        "paths": choices(env, "PATHS", ",".join(KNOWN_PATHS), KNOWN_PATHS),
        "connections": whole(env, "CONNECTIONS", 64, 1),
        "threads": whole(env, "WRK_THREADS", 1, 1),
        "duration": whole(env, "DURATION", 20, 1),
        "rounds": whole(env, "ROUNDS", 3, 1),
        "warmup": whole(env, "WARMUP", 5, 0),
        "cpu_iterations": whole(env, "CPU_ITERATIONS", 10000, 1),
        "sleep_ms": whole(env, "SLEEP_MS", 10, 0),
        "endpoint": setting(env, "ENDPOINT", "/ping"),
    }
    if s["connections"] < s["threads"]:
        raise SettingError(f"CONNECTIONS={s['connections']}: must be >= WRK_THREADS={s['threads']}")
    if not s["endpoint"].startswith("/"):
        raise SettingError(f'ENDPOINT="{s["endpoint"]}": must start with /')
    return s


def routes(workloads, s):
    """The catalogue's workload routes with their {PARAMETERS} filled in: the same routes k6 uses."""
    params = {"CPU_ITERATIONS": s["cpu_iterations"], "SLEEP_MS": s["sleep_ms"], "ENDPOINT": s["endpoint"]}
    return {w: re.sub(r"\{([A-Z_]+)\}", lambda m: str(params[m.group(1)]), d["route"]) for w, d in workloads.items()}


def plan(s, route):
    """Every phase in run order: warm-up per path (round 0), then the rounds."""
    phases = []
    for w in s["workloads"]:
        order = [(p, 0, s["warmup"]) for p in s["paths"]] if s["warmup"] > 0 else []
        order += [(p, r, s["duration"]) for r in range(1, s["rounds"] + 1) for p in s["paths"]]
        for path, r, secs in order:
            phases.append({
                "name": f"{w}__{path}__r{r}", "workload": w, "path": path, "round": r,
                "phase": "warmup" if r == 0 else "measure", "endpoint": route[w], "duration_s": secs,
            })
    return phases


def parse_output(out):
    """wrk's output as our summary.lua and the start/end stamps frame it."""
    lines = out.strip().splitlines()
    stamps = [int(x) for x in lines if re.fullmatch(r"[0-9]{13}", x.strip())]
    summary = next((json.loads(x)["wrk_summary"] for x in lines if x.startswith('{"wrk_summary"')), None)
    if len(stamps) != 2 or summary is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    return stamps[0], stamps[1], summary


def run_phase(compose, s, phase):
    url = f"{URLS[phase['path']]}{phase['endpoint']}"
    script = (
        f"date +%s%3N; wrk --script /wrk/summary.lua -t{s['threads']} -c{s['connections']} "
        f"-d{phase['duration_s']}s --latency {shlex.quote(url)}; date +%s%3N"
    )
    if compose is None:  # inside the wrk container
        cmd = ["sh", "-c", script]
    else:
        cmd = compose + ["--profile", "load", "run", "--rm", "-T", "--entrypoint", "sh", "wrk", "-c", script]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return parse_output(res.stdout)


def main():
    env = os.environ
    testid = setting(env, "TESTID", f"run-{int(time.time())}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", testid):
        print(f'TESTID="{testid}": use letters, digits, . _ -', file=sys.stderr)
        return 2
    workloads = CATALOGUE["workloads"]
    try:
        s = read_settings(env, workloads)
    except SettingError as e:
        print(e, file=sys.stderr)
        return 2
    compose = None if env.get("WRK_LOCAL") == "1" else shlex.split(setting(env, "COMPOSE", "docker compose"))
    phases = plan(s, routes(workloads, s))
    print(f"uds-lab wrk run {testid}: max throughput, {s['connections']} connections, "
          f"{s['duration']}s x {s['rounds']} rounds\n")
    print(f"{'phase':28} {'requests':>9} {'req/s':>9} {'errors':>7} {'p50':>10} {'p99':>10}")
    t0 = None
    for ph in phases:
        start, end, w = run_phase(compose, s, ph)
        t0 = t0 if t0 is not None else start
        lat = w["latency_ms"]
        ph.update({
            "start_offset_s": round((start - t0) / 1000, 3),
            "duration_s": round(w["duration_s"], 3),
            "requests": w["requests"],
            "failed_rate": w["errors"] / w["requests"] if w["requests"] else 0,
            "dropped_iterations": 0,
            "duration_ms": {"avg": lat["avg"], "p50": lat["p50"], "p90": lat["p90"], "p95": lat["p95"],
                            "p99": lat["p99"], "max": lat["max"]},
        })
        print(f"{ph['name']:28} {w['requests']:9d} {w['requests'] / w['duration_s']:9.0f} {w['errors']:7d} "
              f"{lat['p50']:9.3f}ms {lat['p99']:9.3f}ms", flush=True)
        time.sleep(GAP_SECONDS)
    measured = [p for p in phases if p["round"] > 0]
    requests = sum(p["requests"] for p in measured)
    failed = sum(p["failed_rate"] * p["requests"] for p in measured)
    out = {
        "testid": testid, "urls": {p: URLS[p] for p in s["paths"]}, "start_ms": t0, "gap_s": GAP_SECONDS, "settings": s,
        "phases": phases, "totals": {"requests": requests, "failed_rate": failed / requests if requests else 0},
        "thresholds_failed": ["http_req_failed"] if requests and failed / requests >= 0.01 else [],
    }
    path = ROOT / "results" / testid / "load.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {path.relative_to(ROOT)}")
    # Like k6's thresholds: a run with more than 1% errors fails.
    return 1 if out["thresholds_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
