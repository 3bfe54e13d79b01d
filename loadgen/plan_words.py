"""The plan in words: its length said before a run starts (plan.json's
"describe"), and each phase's progress line as it starts."""
from plan_orders import MIX, streams

# A stream's paths in words, by its connection handling.
STREAM_WORDS = {"pooled": "pooled paths", "new": "new-connection paths"}


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


def run_words(s, phases, gap_s, most_s=None, first=1):
    """A run's (or a later batch's) length in words, gap_s between its
    phases; with PRECISION, its least and its most (most_s seconds)."""
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
               f"({stream}{rounds}), {gap_s} s between phases, {order}")
    else:
        out = (f"{len(phases)} phases, about {clock(length_s(phases))}: {idle}{len(s['workloads'])} workload(s) x "
               f"{len(s['paths'])} paths x ({warm}{s['rounds']} x {s['duration']} s), {gap_s} s between "
               f"phases, {order}")
    if "precision" in s:
        out += (f"; then more rounds until the answer's intervals are within +/-{s['precision']:g}% "
                f"(PRECISION), at most {s['max_rounds']} rounds in all: about {clock(most_s)} at most")
    return out


def step_words(s, phases, most_s=None):
    """A sweep's step in words; the first also says the whole sweep's most
    (most_s seconds)."""
    step, rates = s["step"], s["rates"]
    at = f"{s['rate']} req/s" if s["sweep"] == "rate" else f"{s['connections']} connections flat out ({s['generator']})"
    stream = (f"{s['interleave']} s of the {len(s['paths'])} paths interleaved request by request (the socket's "
              f"savings), then " if s.get("interleave") else "")
    out = (f"sweep step {step}/{len(rates)} at {at}: {len(phases)} phases, about "
           f"{clock(length_s(phases))}: {stream}{len(s['paths'])} paths x ({s['rounds']} x {s['duration']} s) one at "
           f"a time (where each bends and breaks), order counterbalanced (SEED={s['seed']})")
    if step == 1:
        key = "rate" if s["sweep"] == "rate" else "connections"
        rule = "errors above 1%, or under 95% of the rate" if key == "rate" else "errors above 1%"
        out += (f"; steps at {', '.join(map(str, rates))} {'req/s' if key == 'rate' else 'connections'}, a path "
                f"leaving the sweep once it has failed {s['stop_after_failures']} ({rule}): about {clock(most_s)} at most")
    return out


def progress(phases, i):
    """What the runner says as phase i (0-based) starts; a warm-up phase (round 0) says it is one."""
    left = length_s(phases) - phases[i]["start_offset_s"]
    warm = " (warm-up, left out of the report)" if phases[i]["round"] == 0 else ""
    if phases[i]["path"] == MIX:
        which = STREAM_WORDS[phases[i]["stream"]] if phases[i].get("stream") else "every path"
        warm = f" ({which} interleaved{', warm-up' if phases[i]['round'] == 0 else ''})"
    return f"phase {i + 1}/{len(phases)} {phases[i]['name']}{warm}: about {clock(left)} left"
