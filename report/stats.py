"""Paired statistics over rounds (pure; scipy does the arithmetic): each path's
round r is compared with another path's round r, so the swings a round shares
(this VM's speed moves +-15% between minutes) cancel. A difference or a ratio
gets a 95% t-interval from its per-round values (ratios on the log scale), and
it is *measurable* when that interval excludes no difference and, for a figure
read from a coarse counter, the difference is at least the counter's
resolution. The answer's several comparisons are judged together with Holm's
correction (holm() below: scipy has no Holm, and statsmodels, which has, would
bring pandas into the report's image for six lines). report/test_calibration.py
holds the rule to its error rates on simulated rounds."""
import math

from scipy import stats as sps

from report.lab import BASELINE
from report.values import METRICS, div, headline, mean

# ALPHA set, CONFIDENCE from it: 1 - 0.95 is 0.05000000000000004 in floats,
# under which a p of exactly 0.05 would count as below ALPHA.
ALPHA = 0.05
CONFIDENCE = 1 - ALPHA
# A report's ALPHA split between its two families, so that with no difference
# anywhere the chance that it states any is at most their sum, ALPHA: the
# answer (the question asked: the socket against TCP through the same nginx,
# Holm over its comparisons) and everything else, exploration
# (Benjamini-Hochberg over it). The answer judged with the ~150 others lost
# most of its power (docs/statistics.md).
ANSWER_ALPHA = 0.04
EXPLORE_ALPHA = 0.01
METHOD = "paired t-interval over rounds"


def t_interval(values):
    """(mean, low, high, p) of a sample, the interval at CONFIDENCE and the
    two-sided p-value against 0; low, high and p are None under 2 values and
    where the values do not spread (identical rounds: t is undefined, and
    two equal rounds say nothing of how far a third would fall)."""
    n = len(values)
    m = sum(values) / n
    if n < 2 or max(values) - min(values) <= 1e-9 * max(1.0, abs(m)):
        return m, None, None, None
    # scipy's t distribution directly: the same as ttest_1samp, a tenth of its
    # time (a sweep's report and the simulation tests call this thousands of times).
    se = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1) / n)
    q = sps.t.ppf(1 - ALPHA / 2, n - 1)
    return m, m - q * se, m + q * se, float(2 * sps.t.sf(abs(m) / se, n - 1))


def diff_stats(a_by_round, b_by_round, scale=1.0, resolution=None, less=None):
    """The per-round difference a - b (times scale); with less=(c, d), the
    difference in differences (a - b) - (c - d), round by round. Returns its
    mean, 95% interval (lo, hi), p, min and max over rounds, the means of a and
    b, relative (the mean as a share of a's mean) and the resolution a
    difference must reach; None when no round has every value."""
    sources = [a_by_round, b_by_round] + list(less or [])
    rounds = sorted(r for r in a_by_round if all(s.get(r) is not None for s in sources))
    if not rounds:
        return None
    # Rounds some path has but the pairing cannot use (a value missing): counted, and said with the interval.
    dropped = len({r for s in sources for r in s} - set(rounds))
    per_round = {}
    for r in rounds:
        v = a_by_round[r] - b_by_round[r]
        if less:
            v -= less[0][r] - less[1][r]
        per_round[r] = scale * v
    vs = list(per_round.values())
    m, lo, hi, p = t_interval(vs)
    a_mean = mean([scale * a_by_round[r] for r in rounds])
    return {"mean": m, "lo": lo, "hi": hi, "p": p, "min": min(vs), "max": max(vs), "rounds": len(vs),
            "a_mean": a_mean, "b_mean": mean([scale * b_by_round[r] for r in rounds]),
            "relative": div(m, a_mean), "resolution": resolution, "method": METHOD,
            "dropped": dropped, "dropped_why": "a value missing",
            "per_round": {str(r): v for r, v in per_round.items()}}


def ratio_stats(path_by_round, base_by_round):
    """The per-round ratio path/base; its geometric mean and 95% interval from
    a t-interval on the log ratios, p, and min and max over rounds."""
    per_round = {}
    for r, v in sorted(path_by_round.items()):
        ratio = div(v, base_by_round.get(r))
        if ratio is not None and ratio > 0:
            per_round[r] = ratio
    if not per_round:
        return None
    # A ratio of 0 or below has no logarithm (the host's switches above idle can
    # come out below 0): such rounds are left out, counted and said.
    dropped = len(set(path_by_round) | set(base_by_round)) - len(per_round)
    vs = list(per_round.values())
    m, lo, hi, p = t_interval([math.log(v) for v in vs])
    return {"mean": math.exp(m), "lo": None if lo is None else math.exp(lo), "hi": None if hi is None else math.exp(hi),
            "p": p, "min": min(vs), "max": max(vs), "rounds": len(vs), "method": METHOD + ", log scale",
            "dropped": dropped, "dropped_why": "a value missing, or a ratio of 0 or below",
            "per_round": {str(r): v for r, v in per_round.items()}}


def has_interval(d):
    """Whether d has an interval at all (two or more values that spread)."""
    return d["rounds"] >= 2 and d.get("lo") is not None


def stein(d, first):
    """Stein's two-stage interval, in place, for a run whose first `first`
    rounds set how many it ran (PRECISION): the mean over every round, its
    spread and degrees of freedom from the first stage alone. The total was
    chosen from that spread only, so the interval keeps its 95% (exactly, for
    normal rounds); the usual interval on every round would be too narrow
    where a small first spread stopped the run early. d unchanged where the
    first stage has no spread to use."""
    if d is None or not first or first < 2:
        return d
    log = d["method"].endswith("log scale")
    xs = {int(r): math.log(v) if log else v for r, v in d["per_round"].items()}
    stage = [v for r, v in xs.items() if r <= first]
    if len(stage) < 2 or len(xs) < 2:
        return d
    m = sum(xs.values()) / len(xs)
    s0 = math.sqrt(sum((v - sum(stage) / len(stage)) ** 2 for v in stage) / (len(stage) - 1))
    if s0 <= 1e-12 * max(1.0, abs(m)):
        return d
    se, df = s0 / math.sqrt(len(xs)), len(stage) - 1
    q = sps.t.ppf(1 - ALPHA / 2, df)
    lo, hi = (m - q * se, m + q * se)
    d.update({"lo": math.exp(lo) if log else lo, "hi": math.exp(hi) if log else hi,
              "p": float(2 * sps.t.sf(abs(m) / se, df)), "first_stage": len(stage),
              "method": d["method"] + f"; Stein's two-stage interval (the spread of the first {len(stage)} rounds)"})
    return d


def significant(d):
    """Whether d's interval excludes no difference, after every correction
    it was given: Holm's over the answer's comparisons (holm()) or
    Benjamini-Hochberg's over the report's other comparisons (fdr())."""
    ps = [d.get(k) for k in ("p", "p_holm", "p_fdr") if k in d]
    return has_interval(d) and None not in ps and max(ps) < ALPHA


def measurable(d):
    """A difference worth a number: significant, and larger than the
    resolution of the counter it was read from (one step of a counter is
    quantisation, not a measurement). Either sign alike: the socket costing
    more is judged as the socket saving."""
    if d is None or not significant(d):
        return False
    return d.get("resolution") is None or abs(d["mean"]) > d["resolution"]


def judge(ratio):
    """What a ratio allows one to say: clear | straddles | single (no
    interval: one round, or rounds that do not spread) | none."""
    if ratio is None:
        return "none"
    if not has_interval(ratio):
        return "single"
    return "clear" if significant(ratio) and not ratio.get("below_resolution") else "straddles"


def holm(items, alpha=ALPHA):
    """Holm's step-down correction over several comparisons judged together
    at level alpha: sets each one's p_holm (items: stats dicts with a p, or
    None), Holm's adjusted p times ALPHA / alpha, so that it is held to ALPHA
    as every p is (significant())."""
    ranked = sorted((d for d in items if d is not None and d.get("p") is not None), key=lambda d: d["p"])
    k, running = len(ranked), 0.0
    for i, d in enumerate(ranked):
        running = max(running, min(1.0, (k - i) * d["p"]))
        d["p_holm"] = min(1.0, running * (ALPHA / alpha))
    return items


def no_interval(d):
    """Why d has no interval, in words ("1 round", "3 rounds, all equal")."""
    if d["rounds"] < 2:
        return "1 round"
    return f"{d['rounds']} {d.get('over', 'rounds')}, all equal"


def fdr(items, alpha=ALPHA):
    """Benjamini-Hochberg's correction at false discovery rate alpha over a
    family of comparisons (a report's exploration: every comparison but the
    answer's; items: stats dicts or None; each counted once): sets each one's
    p_fdr, the adjusted p times ALPHA / alpha (held to ALPHA as every p is),
    and the size of the family. A report states dozens of differences; with
    no true difference anywhere this keeps the chance that it states any at
    alpha, and where many differ it controls the share of false ones among
    those it states (scipy's false_discovery_control)."""
    seen, ds = set(), []
    for d in items:
        if d is not None and d.get("p") is not None and id(d) not in seen:
            seen.add(id(d))
            ds.append(d)
    if ds:
        for d, q in zip(ds, sps.false_discovery_control([d["p"] for d in ds], method="bh")):
            d["p_fdr"], d["fdr_family"] = min(1.0, float(q) * (ALPHA / alpha)), len(ds)
    return items


def lost_to(d):
    """Which correction took back a difference whose own interval excludes
    none: "holm" (the answer's), "fdr" (the report's), or None."""
    if d is None or d.get("p") is None or d["p"] >= ALPHA or not has_interval(d):
        return None
    if d.get("p_holm") is not None and d["p_holm"] >= ALPHA:
        return "holm"
    if d.get("p_fdr") is not None and d["p_fdr"] >= ALPHA:
        return "fdr"
    return None


def fmt_interval(d, unit="", decimals=1, times=False):
    """ "95% CI lo to hi unit, n rounds" (ratios: "lo-hix"), or why there is
    none; rounds left out of the pairing are counted."""
    if not has_interval(d):
        return f"{no_interval(d)}: no interval"
    n = f"{d['rounds']} {d.get('over', 'rounds')}"
    if d.get("dropped"):
        n += f"; {d['dropped']} left out: {d['dropped_why']}"
    if times:
        return f"95% CI {d['lo']:.2f}-{d['hi']:.2f}x, {n}"
    u = f" {unit}" if unit else ""
    return f"95% CI {d['lo']:,.{decimals}f} to {d['hi']:,.{decimals}f}{u}, {n}"


def verdict(path, ratio):
    """A plain sentence for a ratio to the baseline."""
    status = judge(ratio)
    if status == "none":
        return "n/a"
    if status == "single":
        return f"{path} {ratio['mean']:.2f}x {BASELINE} ({no_interval(ratio)}: no interval, no verdict)"
    if status == "straddles" and ratio.get("below_resolution"):
        return f"no measurable difference from {BASELINE} (below the counter's resolution)"
    if status == "straddles" and lost_to(ratio) == "fdr":
        return (f"no measurable difference from {BASELINE} once the report's {ratio['fdr_family']} comparisons are "
                f"judged together ({fmt_interval(ratio, times=True)} alone)")
    if status == "straddles":
        return f"no measurable difference from {BASELINE} ({fmt_interval(ratio, times=True)})"
    return f"{path} {ratio['mean']:.2f}x {BASELINE} ({fmt_interval(ratio, times=True)})"


def aggregate(phases, settings):
    """Per workload and path: the rounds, the mean of each figure over rounds,
    and each figure's ratio to the baseline computed per round (None for the
    baseline itself or when it was not measured)."""
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
        base = by_path.get(BASELINE)
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
            if base is not None and path != BASELINE:
                base_metric = {k: {p["round"]: p["figures"].get(k) for p in base} for k in METRICS}
                entry["ratio_to_tcp"] = {k: below_resolution(ratio_stats(per_metric[k], base_metric[k]), entry["mean"][k],
                                                             mean(base_metric[k].values()), rounds + base, k)
                                         for k in METRICS}
                entry["verdict"] = verdict(path, entry["ratio_to_tcp"][headline(settings)[0]])
            paths[path] = entry
        workloads[w] = {"tcp_measured": base is not None, "paths": paths}
    return workloads


def below_resolution(ratio, a, b, phases, key):
    """ratio, marked "below_resolution" (the counter's step) where the two
    means it compares differ by no more than the coarsest resolution of the
    counter over these phases: one tick is quantisation, not a ratio to read."""
    res = [p.get("resolution", {}).get(key) for p in phases]
    res = max((r for r in res if r is not None), default=None)
    if ratio is not None and res is not None and a is not None and b is not None and abs(a - b) <= res:
        ratio["below_resolution"] = res
    return ratio


def common_reason(phases, key):
    """The reason a figure is missing, if it is missing in every phase for the same one."""
    reasons = {(p.get("missing") or {}).get(key) for p in phases}
    return reasons.pop() if len(reasons) == 1 and None not in reasons else None
