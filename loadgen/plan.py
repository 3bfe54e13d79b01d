"""The run plan, the one definition of it: which phases a run has, in which
order, named how, and what a run says of its length and progress. Every
generator runs the same plan: the wrk and oha runners build it here
in-process; for openloop (and k6) the run's program (loadgen/drive.py)
writes it to results/<TESTID>/plan.json, and loadgen/openloop (or
loadgen/load.js) reads it.

First an idle phase (IDLE seconds, no requests, skipped when IDLE=0): the
report measures the host's background there (its context switches per
second) and subtracts it from each phase. Then for each workload (SCENARIO,
in order): a warm-up phase per path (round 0, WARMUP seconds, skipped when
WARMUP=0), then ROUNDS rounds of every path, one path at a time (DURATION
seconds each), GAP_SECONDS apart. A phase is named
`<workload>__<path>__r<round>`. Paths and workloads come from catalogue.json.

The order of the paths changes from round to round (counterbalanced): the
rows of a balanced Latin square (Williams), paths assigned to its symbols and
rows taken in an order both drawn from SEED. Over len(PATHS) rounds every path
runs once in each position and after each other path once, so drift within a
round and the tail of one path (TIME_WAIT sockets, GC) fall on every path
alike, the baseline included. SEED is recorded in the plan, so a run's order
can be repeated.

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
"""
import json
import math
import os
import random
import re
import secrets
import subprocess
import sys
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEMA = HERE / "load.schema.json"
# Pause between phases: one phase's tail (closing connections, GC) stays out of the next.
GAP_SECONDS = 1
# make load's interleaved stream: its pseudo-path in phase names (<workload>__mix__r1),
# and the fewest blocks an interval is taken from.
MIX = "mix"
MIN_BLOCKS = 10
MODES = ("rate", "max", "sweep")
# make load TRAFFIC=...: the workload's name in phase names (traffic__mix__r1).
TRAFFIC_WORKLOAD = "traffic"
# A replay's schedule, beside the plan (loadgen/replay.py writes it; the run deletes it when it ends).
REPLAY_FILE = "replay.tsv"
# A replay's phases name their requests' route in words (each request's target is the schedule's).
REPLAY_ENDPOINT = {"emulate": "/replay/:bytes/:us", "logged": "/:logged-path"}
# GENERATOR unset: each mode's own (.env's GENERATOR is empty by default).
DEFAULT_GENERATOR = {"rate": "openloop", "sweep": "openloop", "max": "wrk"}


def read_catalogue(env=os.environ):
    """catalogue.json, or the file CATALOGUE names."""
    return json.loads(Path(env.get("CATALOGUE") or ROOT / "catalogue.json").read_text())


def generators(catalogue):
    """The load generators catalogue.json lists, the one list of them."""
    return tuple(g for g in catalogue["generators"] if g != "about")


def urls(catalogue):
    """Where a generator reaches each path: its nginx's URL + /<path>; a direct
    path (no nginx): the app's own URL (over its socket where the catalogue
    names one: build() puts it on the path's phases)."""
    out = {name: f"{catalogue['nginx'][p['nginx']]['url']}/{name}" for name, p in catalogue["paths"].items()}
    return {**out, **{name: p["url"] for name, p in direct_paths(catalogue).items()}}


def direct_paths(catalogue):
    """The client straight to the app, no nginx (catalogue.json's direct)."""
    return (catalogue.get("direct") or {}).get("paths") or {}


class SettingError(Exception):
    """A bad setting, named with its value: the runner's exit 2."""


def read_testid(env):
    """TESTID, the run's folder name under results/."""
    testid = setting(env, "TESTID", "")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", testid):
        raise SettingError(f'TESTID="{testid}": use letters, digits, . _ -')
    return testid


# A setting's default is .env's, the one place for it: FROM_ENV. In the
# generator's container compose passes every setting from .env itself; the
# tests and a run by hand read .env with scripts/dotenv.sh, its one reader.
FROM_ENV = object()
DOTENV = ROOT / "scripts" / "dotenv.sh"


@cache
def dotenv():
    """.env's values, where the checkout is at hand (not in a container)."""
    if not DOTENV.exists():
        return {}
    res = subprocess.run(["sh", str(DOTENV)], cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SettingError(f".env: {res.stderr.strip()}")
    return dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)


def setting(env, name, default):
    """The setting's value; unset or empty, its default (FROM_ENV: .env's)."""
    v = env.get(name, "")
    if v != "" or default is not FROM_ENV:
        return default if v == "" else v
    v = dotenv().get(name, "")
    if v == "":
        raise SettingError(f"{name}: empty, and .env gives no value to fall back on")
    return v


def whole(env, name, default, minimum):
    raw = setting(env, name, default if default is FROM_ENV else str(default))
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < minimum:
        raise SettingError(f'{name}="{raw}": must be a whole number >= {minimum}')
    return int(raw)


def one_of(env, name, default, known):
    v = setting(env, name, default)
    if v not in known:
        raise SettingError(f'{name}="{v}": must be one of {", ".join(known)}')
    return v


def choices(env, name, default, known):
    items = [s.strip() for s in setting(env, name, default).split(",") if s.strip()]
    if not items:
        raise SettingError(f"{name}: empty")
    for item in items:
        if item not in known:
            raise SettingError(f'{name}: unknown "{item}" (known: {", ".join(known)})')
    if len(set(items)) != len(items):
        raise SettingError(f"{name}: {','.join(items)} names one twice")
    return items


def default_paths(catalogue):
    """The paths a run takes unless PATHS says otherwise: all but the A/A
    calibration twins."""
    return [name for name, p in catalogue["paths"].items() if not p.get("calibration")]


def read_settings(env, catalogue):
    """The settings every generator shares, validated. SEED: drawn when unset."""
    known = [*catalogue["paths"], *direct_paths(catalogue)]
    mode = one_of(env, "MODE", "rate", MODES)
    s = {
        "mode": mode,
        "generator": one_of(env, "GENERATOR", DEFAULT_GENERATOR[mode], generators(catalogue)),
        "workloads": choices(env, "SCENARIO", FROM_ENV, list(catalogue["workloads"])),
        "paths": choices(env, "PATHS", ",".join(default_paths(catalogue)), known),
        "rate": whole(env, "RATE", FROM_ENV, 1),
        "connections": whole(env, "CONNECTIONS", FROM_ENV, 1),
        "duration": whole(env, "DURATION", FROM_ENV, 1),
        "rounds": whole(env, "ROUNDS", FROM_ENV, 0),
        "warmup": whole(env, "WARMUP", FROM_ENV, 0),
        "idle": whole(env, "IDLE", FROM_ENV, 0),
        "seed": whole(env, "SEED", secrets.randbelow(2**31), 0),
        "precision": percent(env, "PRECISION"),
        "cpu_iterations": whole(env, "CPU_ITERATIONS", FROM_ENV, 1),
        "sleep_ms": whole(env, "SLEEP_MS", FROM_ENV, 0),
        "endpoint": setting(env, "ENDPOINT", FROM_ENV),
    }
    if not s["endpoint"].startswith("/"):
        raise SettingError(f'ENDPOINT="{s["endpoint"]}": must start with /')
    can = catalogue["generators"][s["generator"]]
    if s["mode"] not in can["modes"]:
        raise SettingError(f"GENERATOR={s['generator']}: runs MODE={' or '.join(can['modes'])}, not {s['mode']} "
                           "(catalogue.json's generators say what each can do)")
    if s["generator"] == "wrk":
        s["threads"] = whole(env, "WRK_THREADS", FROM_ENV, 1)
        if s["connections"] < s["threads"]:
            raise SettingError(f"CONNECTIONS={s['connections']}: must be >= WRK_THREADS={s['threads']}")
    direct = [p for p in s["paths"] if p in direct_paths(catalogue)]
    if direct and not can["unix_socket"]:
        raise SettingError(f"PATHS: {', '.join(direct)} needs GENERATOR=oha (no nginx: the app's own socket, which "
                           f"{s['generator']} cannot dial)")
    if setting(env, "TRAFFIC", ""):
        traffic_settings(env, s)
    s["pairs"] = pair_units(s["paths"], catalogue)
    s["pooled"] = [p for p in s["paths"] if (catalogue["paths"].get(p) or {}).get("pooled")]
    # make load's interleaved stream, and each step's of a sweep of rates, where
    # the generator interleaves (wrk and oha drive one URL at a time).
    if can["interleaves"] and (s["mode"] == "rate" or (s["mode"] == "sweep" and setting(env, "SWEEP", FROM_ENV) == "rate")):
        interleave_settings(env, s)
    if "traffic" in s and not s.get("interleave"):
        raise SettingError("TRAFFIC: replayed in make load's interleaved stream: INTERLEAVE=0 has none "
                           "(any INTERLEAVE above 0 will do: the log sets the stream's length)")
    if s["rounds"] == 0 and not s.get("interleave"):
        raise SettingError('ROUNDS="0": must be a whole number >= 1 (0 only for make load with INTERLEAVE: the '
                           "interleaved stream alone, no costs per request)")
    if s["mode"] == "max":
        del s["rate"]  # a flat-out run has no rate
    if s["precision"] is None:
        del s["precision"]
    elif s.get("interleave") and s["mode"] == "rate":
        raise SettingError("PRECISION: make load's answer comes from its interleaved stream (INTERLEAVE seconds), "
                           "which PRECISION does not lengthen: give INTERLEAVE=0 for rounds of one path at a time, "
                           "or a longer INTERLEAVE")
    else:
        s["max_rounds"] = whole(env, "MAX_ROUNDS", 4 * s["rounds"], s["rounds"])
        # The run's first batch must give an interval; a later one may add a single round.
        if s["rounds"] < 2 and first_round(env) == 1:
            raise SettingError(f"PRECISION needs ROUNDS >= 2 (an interval needs two rounds), not {s['rounds']}")
    if s["mode"] == "sweep":
        sweep_settings(env, s, catalogue)
    return s


def traffic_settings(env, s):
    """make load TRAFFIC=...: your access log replayed (loadgen/replay.py) in
    the interleaved stream alone, as the workload "traffic"."""
    if s["mode"] != "rate" or s["generator"] != "openloop":
        raise SettingError(f"TRAFFIC: replayed by make load with openloop, not MODE={s['mode']} "
                           f"GENERATOR={s['generator']}")
    replay, traffic = replay_modules()
    try:
        replay.read_send(env), replay.read_speed(env), traffic.read_settings(env)
    except traffic.TrafficError as e:
        raise SettingError(str(e)) from None
    s["traffic"] = {}  # replayed(): the replay's summary
    s["workloads"] = [TRAFFIC_WORKLOAD]
    s["rounds"] = 0  # no rounds of one path at a time: the log is replayed once per stream


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
    s["traffic"] = r


def replay_modules():
    """loadgen/replay.py and traffic.py (numpy), imported only for a replay: the
    wrk and oha images build plans with a bare Python."""
    sys.path.insert(0, str(HERE))
    import replay
    import traffic
    return replay, traffic


def interleave_settings(env, s):
    """make load's interleaved stream into s: INTERLEAVE seconds a workload (0:
    none, rounds of one path at a time only) in blocks of BLOCK seconds, at
    least MIN_BLOCKS of them; every path in PATHS in it."""
    s["interleave"] = whole(env, "INTERLEAVE", FROM_ENV, 0)
    s["block"] = whole(env, "BLOCK", FROM_ENV, 1)
    if s["interleave"] and (s["interleave"] % s["block"] or s["interleave"] // s["block"] < MIN_BLOCKS):
        raise SettingError(f"INTERLEAVE={s['interleave']}: must be a whole number of BLOCK={s['block']} s blocks, "
                           f"at least {MIN_BLOCKS} of them (0: no interleaved stream)")


def pair_units(paths, catalogue):
    """The paths as a round runs them: the pairs a comparison is made of,
    back to back (the answer's pairs first, then the direct pair and the
    other terms of catalogue.json's breakdown, each path in one pair at most),
    the paths left over alone."""
    terms = catalogue["breakdown"]["terms"]
    ranked = [t["paths"] for t in terms if t.get("answer")] + [(catalogue.get("direct") or {}).get("pair") or []]
    ranked += [t["paths"] for t in terms if not t.get("answer")]
    left, units = list(paths), []
    for pair in ranked:
        if len(pair) == 2 and all(p in left for p in pair):
            units.append(list(pair))
            left = [p for p in left if p not in pair]
    return units + [[p] for p in left]


def paired_orders(units, rounds, seed):
    """The order of the paths in each round 1..rounds: the units (pair_units)
    in an order drawn anew each round, each pair's two paths back to back,
    which one first alternating from round to round (drawn for the first), so
    that over every two rounds each path of a pair runs first once and a
    pair's comparison never spans more than its own two phases. A round's
    draws do not depend on how many rounds follow: a later batch continues
    the same sequence."""
    rng = random.Random(seed)
    flip = [rng.random() < 0.5 for _ in units]
    out = []
    for r in range(1, rounds + 1):
        idx = list(range(len(units)))
        rng.shuffle(idx)
        out.append([p for i in idx for p in (units[i][::-1] if flip[i] ^ (r % 2 == 0) else units[i])])
    return out


def percent(env, name):
    """A percentage ("5" or "5%"), above 0 and below 100, or None when unset."""
    raw = setting(env, name, "")
    if raw == "":
        return None
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)%?", raw)
    if not m or not 0 < float(m.group(1)) < 100:
        raise SettingError(f'{name}="{raw}": must be a percentage above 0 and below 100, e.g. 5%')
    return float(m.group(1))


# make sweep: a path stops stepping once it has failed this many steps (errors
# above 1% of its requests, or under 95% of the step's rate achieved).
SWEEP_FAILS = 2


SWEEPS = ("rate", "connections")


def sweep_settings(env, s, catalogue):
    """make sweep's settings into s: what it steps (SWEEP: rate, at fixed
    arrival rates with openloop (or oha, k6); connections, flat out at rising connections in
    flight), the steps' levels, the step this plan is for (SWEEP_STEP;
    loadgen/drive.py runs them in turn) and its level, and the rounds per step
    (SWEEP_ROUNDS: a sweep is many runs, so fewer than ROUNDS)."""
    s["sweep"] = one_of(env, "SWEEP", FROM_ENV, SWEEPS)
    if s["sweep"] not in catalogue["generators"][s["generator"]]["sweeps"]:
        able = [g for g, c in catalogue["generators"].items() if g != "about" and s["sweep"] in c["sweeps"]]
        raise SettingError(f'GENERATOR="{s["generator"]}": a sweep of {"rates" if s["sweep"] == "rate" else "connections"} '
                           f'runs {" or ".join(able)} ({"a fixed rate" if s["sweep"] == "rate" else "flat out"} per step)')
    if len(s["workloads"]) != 1:
        raise SettingError(f"SCENARIO={','.join(s['workloads'])}: make sweep takes one workload (a sweep each)")
    if "precision" in s:
        raise SettingError("PRECISION: not for make sweep (its steps have SWEEP_ROUNDS rounds each)")
    s["rounds"] = whole(env, "SWEEP_ROUNDS", FROM_ENV, 2)
    s["rates"] = sweep_rates(env) if s["sweep"] == "rate" else rising(env, "SWEEP_CONNECTIONS", FROM_ENV)
    s["step"] = whole(env, "SWEEP_STEP", 1, 1)
    if s["step"] > len(s["rates"]):
        raise SettingError(f"SWEEP_STEP={s['step']}: the sweep has {len(s['rates'])} steps")
    level = s["rates"][s["step"] - 1]
    if s["sweep"] == "rate":
        s["rate"] = level
    else:
        s.pop("rate", None)  # flat out: no rate
        s["connections"] = level
        if s["generator"] == "wrk" and level < s["threads"]:
            raise SettingError(f"SWEEP_CONNECTIONS: {level} is below WRK_THREADS={s['threads']}")
    s["stop_after_failures"] = SWEEP_FAILS


def rising(env, name, default):
    """A rising comma list of whole numbers >= 1."""
    raw = setting(env, name, default)
    items = [x.strip() for x in raw.split(",") if x.strip()]
    ok = items and all(re.fullmatch(r"[0-9]+", x) and int(x) >= 1 for x in items)
    if not ok or [int(x) for x in items] != sorted({int(x) for x in items}):
        unit = "req/s" if name == "SWEEP_RATES" else "connections"
        raise SettingError(f'{name}="{raw}": must be rising whole numbers >= 1 ({unit}), e.g. 100,200,400')
    return [int(x) for x in items]


def sweep_rates(env):
    """SWEEP_RATES (rising, req/s), or SWEEP_STEPS rates from SWEEP_FROM to
    SWEEP_TO, each about the last times one factor (two significant digits)."""
    if setting(env, "SWEEP_RATES", ""):
        return rising(env, "SWEEP_RATES", "")
    lo, hi = whole(env, "SWEEP_FROM", FROM_ENV, 1), whole(env, "SWEEP_TO", 0, 0)
    if hi == 0:
        raise SettingError("SWEEP_TO: unset (make sweep measures it with a flat-out probe; or give SWEEP_RATES)")
    if hi <= lo:
        raise SettingError(f"SWEEP_TO={hi}: must be above SWEEP_FROM={lo}")
    n = whole(env, "SWEEP_STEPS", FROM_ENV, 2)
    if n > hi - lo + 1:
        raise SettingError(f"SWEEP_STEPS={n}: more steps than whole rates from SWEEP_FROM={lo} to SWEEP_TO={hi}")
    return geometric(lo, hi, n)


def geometric(lo, hi, n):
    """n rising rates from lo to hi in equal ratios, each to two significant
    digits (100, 170, 290, ...) and above the last."""
    out = []
    for i in range(n):
        x = lo * (hi / lo) ** (i / (n - 1))
        r = int(float(f"{x:.2g}")) if x >= 100 else round(x)
        out.append(max(r, out[-1] + 1) if out else r)
    return out


def first_round(env):
    """FIRST_ROUND: where a later batch of a PRECISION run starts (1: the run itself)."""
    return whole(env, "FIRST_ROUND", 1, 1)


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


def williams(n):
    """The rows of a balanced Latin square of n symbols (Williams, 1949): each
    symbol once in every position and, over the rows, right after each other
    symbol once (n rows for an even n; 2n, the rows and their mirrors, for odd)."""
    first, lo, hi = [0], 1, n - 1
    for i in range(1, n):
        if i % 2:
            first.append(lo)
            lo += 1
        else:
            first.append(hi)
            hi -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 and n > 1 else rows


def orders(paths, rounds, seed):
    """The order of the paths in each round 1..rounds: Williams rows, with the
    paths assigned to its symbols and the rows' order drawn from seed; after
    every full set of rows, the rows are drawn again."""
    rng = random.Random(seed)
    names = list(paths)
    rng.shuffle(names)
    rows = williams(len(names))
    out = []
    while len(out) < rounds:
        batch = rows[:]
        rng.shuffle(batch)
        out += [[names[i] for i in row] for row in batch]
    return out[:rounds]


def streams(s):
    """The interleaved streams of a workload: (kind, paths), one per connection
    handling in PATHS, the pooled paths' first. A pooled comparison never
    shares its stream with requests that each open a new upstream connection
    (their TIME_WAIT, connection tracking and softirq on the same cores moved
    the pooled answer's sign); the pooled stream runs before the other leaves
    its TIME_WAIT behind. One kind alone: one stream, kind None."""
    pooled = [p for p in s["paths"] if p in (s.get("pooled") or [])]
    new = [p for p in s["paths"] if p not in pooled]
    if not pooled or not new:
        return [(None, list(s["paths"]))]
    return [("pooled", pooled), ("new", new)]


# A stream's paths in words, by its connection handling.
STREAM_WORDS = {"pooled": "pooled paths", "new": "new-connection paths"}


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


def describe(s, phases, route=None, first=1):
    """The plan's length in words, said before a run starts; with PRECISION,
    its least and its most."""
    if "step" in s:
        return describe_step(s, phases, route)
    if first > 1:
        return (f"rounds {first} to {first + s['rounds'] - 1} for PRECISION={s['precision']:g}%: {len(phases)} phases, "
                f"about {clock(length_s(phases))}")
    warm = f"{s['warmup']} s warm-up + " if s["warmup"] > 0 else ""
    idle = f"{s['idle']} s idle + " if s["idle"] > 0 else ""
    order = f"order drawn from SEED={s['seed']}, compared paths back to back in alternating order"
    if s.get("traffic"):
        from replay import describe as replay_words  # replay_modules() put it on the path
        kinds = streams(s)
        each = "" if len(kinds) == 1 else f", once for each of the {len(kinds)} streams (pooled paths, then new-connection)"
        return (f"{len(phases)} phases, about {clock(length_s(phases))}: {idle}{replay_words(s['traffic'])}{each}"
                f"{'; each stream after ' + str(s['warmup']) + ' s of its start as a warm-up' if s['warmup'] else ''}")
    if s.get("interleave"):
        rounds = (f", then {s['rounds']} x {len(s['paths'])} paths x {s['duration']} s one at a time for their costs"
                  if s["rounds"] else ", no rounds of one path at a time (ROUNDS=0)")
        kinds = streams(s)
        if len(kinds) == 1:
            stream = f"{warm}{s['interleave']} s of all {len(s['paths'])} paths interleaved request by request"
        else:
            (k1, p1), (k2, p2) = kinds
            stream = (f"{warm}{s['interleave']} s of the {len(p1)} {STREAM_WORDS[k1]} interleaved request by request, "
                      f"then the same of the {len(p2)} {STREAM_WORDS[k2]}")
        out = (f"{len(phases)} phases, about {clock(length_s(phases))}: {idle}{len(s['workloads'])} workload(s) x "
               f"({stream}{rounds}), {GAP_SECONDS} s between phases, {order}")
    else:
        out = (f"{len(phases)} phases, about {clock(length_s(phases))}: {idle}{len(s['workloads'])} workload(s) x "
               f"{len(s['paths'])} paths x ({warm}{s['rounds']} x {s['duration']} s), {GAP_SECONDS} s between "
               f"phases, {order}")
    if "precision" in s:
        most = length_s(plan({**s, "rounds": s["max_rounds"]}, route))
        out += (f"; then more rounds until the answer's intervals are within +/-{s['precision']:g}% "
                f"(PRECISION), at most {s['max_rounds']} rounds in all: about {clock(most)} at most")
    return out


def describe_step(s, phases, route):
    """A sweep's step in words; the first also says the whole sweep's most."""
    step, rates = s["step"], s["rates"]
    at = f"{s['rate']} req/s" if s["sweep"] == "rate" else f"{s['connections']} connections flat out ({s['generator']})"
    stream = (f"{s['interleave']} s of the {len(s['paths'])} paths interleaved request by request (the socket's "
              f"savings), then " if s.get("interleave") else "")
    out = (f"sweep step {step}/{len(rates)} at {at}: {len(phases)} phases, about "
           f"{clock(length_s(phases))}: {stream}{len(s['paths'])} paths x ({s['rounds']} x {s['duration']} s) one at "
           f"a time (where each bends and breaks), order counterbalanced (SEED={s['seed']})")
    if step == 1:
        key = "rate" if s["sweep"] == "rate" else "connections"
        most = length_s(phases) + sum(length_s(plan({**s, "step": i, key: r}, route)) + 5
                                      for i, r in enumerate(rates[1:], 2))
        rule = "errors above 1%, or under 95% of the rate" if key == "rate" else "errors above 1%"
        out += (f"; steps at {', '.join(map(str, rates))} {'req/s' if key == 'rate' else 'connections'}, a path "
                f"leaving the sweep once it has failed {s['stop_after_failures']} ({rule}): about {clock(most)} at most")
    return out


def progress(phases, i):
    """What the runner says as phase i (0-based) starts; a warm-up phase (round 0) says it is one."""
    left = length_s(phases) - phases[i]["start_offset_s"]
    warm = " (warm-up, left out of the report)" if phases[i]["round"] == 0 else ""
    if phases[i]["path"] == MIX:
        which = STREAM_WORDS[phases[i]["stream"]] if phases[i].get("stream") else "every path"
        warm = f" ({which} interleaved{', warm-up' if phases[i]['round'] == 0 else ''})"
    return f"phase {i + 1}/{len(phases)} {phases[i]['name']}{warm}: about {clock(left)} left"


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


# make floor (services/floor): each transport's connect phase stops after this
# many connections, so that TIME_WAIT sockets (60 s each) never exhaust the
# client's ephemeral ports over a run.
FLOOR_CONNECTS = 1000


def floor_settings(env, catalogue):
    """make floor's settings, validated: transports and message sizes, and the
    rounds, order and warm-up as a run of the paths has them."""
    s = {
        "mode": "floor",
        "transports": choices(env, "FLOOR_TRANSPORTS", ",".join(catalogue["floor"]["transports"]),
                              list(catalogue["floor"]["transports"])),
        "sizes": sizes(env),
        "duration": whole(env, "FLOOR_DURATION", FROM_ENV, 1),
        "rounds": whole(env, "ROUNDS", FROM_ENV, 2),
        "warmup": whole(env, "WARMUP", FROM_ENV, 0),
        "seed": whole(env, "SEED", secrets.randbelow(2**31), 0),
        "connects": FLOOR_CONNECTS,
    }
    return s


def sizes(env):
    """FLOOR_SIZES: message sizes in bytes, a comma list (default 100 B and 100 KiB)."""
    raw = setting(env, "FLOOR_SIZES", FROM_ENV)
    items = [x.strip() for x in raw.split(",") if x.strip()]
    if not items or not all(re.fullmatch(r"[0-9]+", x) and 1 <= int(x) <= 1 << 24 for x in items):
        raise SettingError(f'FLOOR_SIZES="{raw}": must be a comma list of sizes in bytes, 1 to 16777216')
    if len(set(items)) != len(items):
        raise SettingError(f"FLOOR_SIZES: {raw} names one twice")
    return [int(x) for x in items]


def floor_build(env, catalogue):
    """make floor's plan: a warm-up per transport (round 0: a round trip of
    the first size), then ROUNDS rounds of every transport in a
    counterbalanced order (as the paths' rounds), each transport measuring a
    round trip per size on one connection, then new connections (connect,
    1-byte exchange, close; at most FLOOR_CONNECTS)."""
    testid = read_testid(env)
    s = floor_settings(env, catalogue)
    where = {t: catalogue["floor"]["transports"][t]["address"] for t in s["transports"]}

    def phase(t, measure, size, r, secs):
        return {"name": f"floor__{t}__{measure}__r{r}", "transport": t, "measure": measure.split("-")[0],
                "size": size, "round": r, "phase": "warmup" if r == 0 else "measure", "duration_s": secs,
                "address": where[t]}

    phases = [phase(t, f"rtt-{s['sizes'][0]}", s["sizes"][0], 0, s["warmup"]) for t in s["transports"]] \
        if s["warmup"] > 0 else []
    for r, order in enumerate(orders(s["transports"], s["rounds"], s["seed"]), 1):
        for t in order:
            phases += [phase(t, f"rtt-{n}", n, r, s["duration"]) for n in s["sizes"]]
            phases.append(phase(t, "connect", 1, r, s["duration"]))
    for p in phases:
        if p["measure"] == "connect":
            p["max_ops"] = FLOOR_CONNECTS
    total = sum(p["duration_s"] for p in phases)
    left = total
    for i, p in enumerate(phases):
        warm = " (warm-up)" if p["round"] == 0 else ""
        p["progress"] = f"phase {i + 1}/{len(phases)} {p['name']}{warm}: about {clock(left)} left"
        left -= p["duration_s"]
    warm = f"{s['warmup']} s warm-up + " if s["warmup"] > 0 else ""
    describe = (f"{len(phases)} phases, about {clock(total)}: {len(s['transports'])} transports x ({warm}"
                f"{s['rounds']} x ({len(s['sizes'])} round-trip sizes + connect) x {s['duration']} s), "
                f"order counterbalanced (SEED={s['seed']})")
    return {"testid": testid, "settings": s, "describe": describe, "length_s": total, "first_round": 1,
            "phases": phases}


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
