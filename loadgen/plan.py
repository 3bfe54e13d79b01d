"""The run plan, in Python: which phases a run has, in which order, named how.

First an idle phase (IDLE seconds, no requests, skipped when IDLE=0): the
report measures the host's background there (its context switches per
second) and subtracts it from each phase. Then for each workload (SCENARIO,
in order): a warm-up phase per path (round 0,
WARMUP seconds, skipped when WARMUP=0), then ROUNDS rounds of every path in
turn (DURATION seconds each), one path at a time, GAP_SECONDS apart. A phase is
named `<workload>__<path>__r<round>`. Paths and workloads come from
catalogue.json.

The wrk runner (wrk_runner.py), bench_wrk.py and the report's tests use this
module; k6 cannot import Python, so loadgen/load.js writes the same plan in
JavaScript and test_k6.py holds the two equal (k6's own scenarios, read with
`k6 inspect`, and the phases of its load.json against plan() for the same
settings). load.schema.json is the shape of the load.json both write.
"""
import json
import os
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEMA = HERE / "load.schema.json"
# Pause between phases: one phase's tail (closing connections, GC) stays out of the next.
GAP_SECONDS = 2


def read_catalogue(env=os.environ):
    """catalogue.json, or the file CATALOGUE names (as k6 reads it)."""
    return json.loads(Path(env.get("CATALOGUE") or ROOT / "catalogue.json").read_text())


def urls(catalogue):
    """Where a generator reaches each path: its nginx's URL + /<path>."""
    return {name: f"{catalogue['nginx'][p['nginx']]['url']}/{name}" for name, p in catalogue["paths"].items()}


class SettingError(Exception):
    """A bad setting, named with its value: the runner's exit 2."""


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


def read_settings(env, catalogue):
    """The settings every generator shares, validated (load.js reads the same ones)."""
    known = list(catalogue["paths"])
    s = {
        "workloads": choices(env, "SCENARIO", "ping", list(catalogue["workloads"])),
        "paths": choices(env, "PATHS", ",".join(known), known),
        "connections": whole(env, "CONNECTIONS", 64, 1),
        "duration": whole(env, "DURATION", 20, 1),
        "rounds": whole(env, "ROUNDS", 3, 1),
        "warmup": whole(env, "WARMUP", 5, 0),
        "idle": whole(env, "IDLE", 10, 0),
        "cpu_iterations": whole(env, "CPU_ITERATIONS", 10000, 1),
        "sleep_ms": whole(env, "SLEEP_MS", 10, 0),
        "endpoint": setting(env, "ENDPOINT", "/ping"),
    }
    if not s["endpoint"].startswith("/"):
        raise SettingError(f'ENDPOINT="{s["endpoint"]}": must start with /')
    return s


def routes(workloads, s):
    """The catalogue's workload routes with their {PARAMETERS} filled in."""
    params = {"CPU_ITERATIONS": s["cpu_iterations"], "SLEEP_MS": s["sleep_ms"], "ENDPOINT": s["endpoint"]}
    return {w: re.sub(r"\{([A-Z_]+)\}", lambda m: str(params[m.group(1)]), d["route"]) for w, d in workloads.items()}


def idle_window(s):
    """The idle phase load.json records (no requests: the host's background), or
    None when IDLE=0. It starts the run; the first phase follows a gap after it."""
    return {"start_offset_s": 0, "duration_s": s["idle"]} if s["idle"] > 0 else None


def plan(s, route):
    """Every phase in run order, with its planned offset from the start (after
    the idle phase and a gap, when there is one)."""
    phases, at = [], (s["idle"] + GAP_SECONDS if s["idle"] > 0 else 0)
    for w in s["workloads"]:
        order = [(p, 0, s["warmup"]) for p in s["paths"]] if s["warmup"] > 0 else []
        order += [(p, r, s["duration"]) for r in range(1, s["rounds"] + 1) for p in s["paths"]]
        for path, r, secs in order:
            phases.append({
                "name": f"{w}__{path}__r{r}", "workload": w, "path": path, "round": r,
                "phase": "warmup" if r == 0 else "measure", "endpoint": route[w],
                "start_offset_s": at, "duration_s": secs,
            })
            at += secs + GAP_SECONDS
    return phases


def length_s(phases):
    """How long a plan runs: its last phase's end (no gap after it)."""
    return phases[-1]["start_offset_s"] + phases[-1]["duration_s"] if phases else 0


def clock(seconds):
    """12 -> "12s", 513 -> "8m33s", 3725 -> "1h02m05s"."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def describe(s, phases):
    """The plan's length in words, said before a run starts (load.js says the same)."""
    warm = f"{s['warmup']} s warm-up + " if s["warmup"] > 0 else ""
    idle = f"{s['idle']} s idle + " if s["idle"] > 0 else ""
    return (f"{len(phases)} phases, about {clock(length_s(phases))}: {idle}{len(s['workloads'])} workload(s) x "
            f"{len(s['paths'])} paths x ({warm}{s['rounds']} x {s['duration']} s), {GAP_SECONDS} s between phases")


def progress(phases, i):
    """What the runner says as phase i (0-based) starts."""
    left = length_s(phases) - phases[i]["start_offset_s"]
    return f"phase {i + 1}/{len(phases)} {phases[i]['name']}: about {clock(left)} left"
