"""make floor's plan (services/floor): each transport's round trips and
connects, in rounds counterbalanced as a run of the paths has them."""
import re
import secrets

from plan_env import FROM_ENV, SettingError, choices, read_testid, setting, whole
from plan_orders import orders
from plan_words import clock


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
