"""The run's settings, validated, as the plan holds them (its "settings"):
catalogue.json's paths, workloads and generators, and the settings of make
load (its interleaved stream, TRAFFIC's replay), PRECISION's batches and make
sweep's steps. A bad one is a SettingError naming it."""
import json
import os
import secrets
import sys
from pathlib import Path

from plan_env import FROM_ENV, SettingError, choices, first_round, one_of, percent, rising, setting, whole
from plan_orders import pair_units

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODES = ("rate", "max", "sweep")
# make load's interleaved stream: the fewest blocks an interval is taken from.
MIN_BLOCKS = 10
# make load TRAFFIC=...: the workload's name in phase names (traffic__mix__r1).
TRAFFIC_WORKLOAD = "traffic"
# GENERATOR unset: each mode's own (.env's GENERATOR is empty by default).
DEFAULT_GENERATOR = {"rate": "openloop", "sweep": "openloop", "max": "wrk"}


def read_catalogue(env=os.environ):
    """catalogue.json, or the file CATALOGUE names."""
    return json.loads(Path(env.get("CATALOGUE") or ROOT / "catalogue.json").read_text())


def generators(catalogue):
    """The load generators catalogue.json lists, the one list of them."""
    return tuple(g for g in catalogue["generators"] if g != "about")


def direct_paths(catalogue):
    """The client straight to the app, no nginx (catalogue.json's direct)."""
    return (catalogue.get("direct") or {}).get("paths") or {}


def default_paths(catalogue):
    """The paths a run takes unless PATHS says otherwise: all but the A/A
    calibration twins."""
    return [name for name, p in catalogue["paths"].items() if not p.get("calibration")]


def read_settings(env, catalogue):
    """The settings every generator shares, validated. SEED: drawn when unset."""
    s = shared_settings(env, catalogue)
    check_generator(env, s, catalogue)
    if setting(env, "TRAFFIC", ""):
        traffic_settings(env, s)
    s["pairs"] = pair_units(s["paths"], catalogue)
    s["pooled"] = [p for p in s["paths"] if (catalogue["paths"].get(p) or {}).get("pooled")]
    # make load's interleaved stream, and each step's of a sweep of rates, where
    # the generator interleaves (wrk and oha drive one URL at a time).
    can = catalogue["generators"][s["generator"]]
    if can["interleaves"] and (s["mode"] == "rate" or (s["mode"] == "sweep" and setting(env, "SWEEP", FROM_ENV) == "rate")):
        interleave_settings(env, s)
    check_rounds(s)
    if s["mode"] == "max":
        del s["rate"]  # a flat-out run has no rate
    precision_settings(env, s)
    if s["mode"] == "sweep":
        sweep_settings(env, s, catalogue)
    return s


def shared_settings(env, catalogue):
    """The settings read for every run, each checked against its form."""
    known = [*catalogue["paths"], *direct_paths(catalogue)]
    mode = one_of(env, "MODE", "rate", MODES)
    return {
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


def check_generator(env, s, catalogue):
    """ENDPOINT's form, and what the generator can do (catalogue.json): the
    mode, wrk's threads, the direct paths' socket."""
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


def check_rounds(s):
    """A run measures something: TRAFFIC's replay needs the interleaved
    stream, and ROUNDS=0 leaves only that stream."""
    if "traffic" in s and not s.get("interleave"):
        raise SettingError("TRAFFIC: replayed in make load's interleaved stream: INTERLEAVE=0 has none "
                           "(any INTERLEAVE above 0 will do: the log sets the stream's length)")
    if s["rounds"] == 0 and not s.get("interleave"):
        raise SettingError('ROUNDS="0": must be a whole number >= 1 (0 only for make load with INTERLEAVE: the '
                           "interleaved stream alone, no costs per request)")


def precision_settings(env, s):
    """PRECISION into s, with MAX_ROUNDS; unset, no "precision" at all."""
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
