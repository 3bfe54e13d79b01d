"""Aggregates and ratios (pure): per workload and path, the mean of each figure
over rounds and its ratio to tcp computed round by round, with its spread."""
from report.lab import BASELINE
from report.values import METRICS, div, headline, mean

MAX_RELATIVE_SPREAD = 0.20  # (max - min) / mean of the per-round ratios


def ratio_stats(path_by_round, tcp_by_round):
    """Per-round ratio path/tcp, then mean, min, max of those ratios (the spread)."""
    per_round = {}
    for r, v in sorted(path_by_round.items()):
        t = tcp_by_round.get(r)
        ratio = div(v, t)
        if ratio is not None:
            per_round[r] = ratio
    if not per_round:
        return None
    vs = list(per_round.values())
    return {
        "mean": sum(vs) / len(vs),
        "min": min(vs),
        "max": max(vs),
        "rounds": len(vs),
        "per_round": {str(r): v for r, v in per_round.items()},
    }


def judge(ratio):
    """What a ratio's spread allows one to say: clear | straddles | wide | single | none."""
    if ratio is None:
        return "none"
    if ratio["rounds"] < 2:
        return "single"
    if ratio["min"] <= 1.0 <= ratio["max"]:
        return "straddles"
    if (ratio["max"] - ratio["min"]) / ratio["mean"] > MAX_RELATIVE_SPREAD:
        return "wide"
    return "clear"


def verdict(path, ratio):
    """A plain sentence for a ratio to tcp."""
    status = judge(ratio)
    if status == "none":
        return "n/a"
    rng = f"{ratio['min']:.2f}-{ratio['max']:.2f}"
    if status == "single":
        return f"{path} {ratio['mean']:.2f}x tcp (1 round: spread cannot be judged)"
    if status == "straddles":
        return f"no clear difference from tcp ({rng})"
    if status == "wide":
        return f"spread too wide ({rng})"
    return f"{path} {ratio['mean']:.2f}x tcp ({rng})"


def aggregate(phases, settings):
    """Per workload and path: the rounds, the mean of each figure over rounds,
    and each figure's ratio to tcp computed per round (None for tcp itself or
    when tcp was not measured)."""
    workloads = {}
    order = settings.get("workloads") or sorted({p["workload"] for p in phases})
    path_order = settings.get("paths") or sorted({p["path"] for p in phases})
    for w in order:
        mine = [p for p in phases if p["workload"] == w]
        if not mine:
            continue
        by_path = {}
        for path in path_order:
            rounds = sorted((p for p in mine if p["path"] == path), key=lambda p: p["round"])
            if rounds:
                by_path[path] = rounds
        tcp = by_path.get(BASELINE)
        paths = {}
        for path, rounds in by_path.items():
            per_metric = {k: {p["round"]: p["figures"].get(k) for p in rounds} for k in METRICS}
            entry = {
                "phases": [p["name"] for p in rounds],
                "rounds": [p["round"] for p in rounds],
                "mean": {k: mean(v.values()) for k, v in per_metric.items()},
                "min": {k: min((x for x in v.values() if x is not None), default=None) for k, v in per_metric.items()},
                "max": {k: max((x for x in v.values() if x is not None), default=None) for k, v in per_metric.items()},
                # Why a figure is n/a in every round, where one reason covers them all.
                "missing": {k: why for k in METRICS if (why := common_reason(rounds, k))},
                "ratio_to_tcp": None,
                "verdict": None,
            }
            if tcp is not None and path != BASELINE:
                tcp_metric = {k: {p["round"]: p["figures"].get(k) for p in tcp} for k in METRICS}
                entry["ratio_to_tcp"] = {k: ratio_stats(per_metric[k], tcp_metric[k]) for k in METRICS}
                entry["verdict"] = verdict(path, entry["ratio_to_tcp"][headline(settings)[0]])
            paths[path] = entry
        workloads[w] = {"tcp_measured": tcp is not None, "paths": paths}
    return workloads


def common_reason(phases, key):
    """The reason a figure is missing, if it is missing in every phase for the same one."""
    reasons = {(p.get("missing") or {}).get(key) for p in phases}
    return reasons.pop() if len(reasons) == 1 and None not in reasons else None
