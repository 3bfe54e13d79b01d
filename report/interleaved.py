"""make load's interleaved stream (pure): one arrival stream whose requests
went to every path in a balanced random order, each path's client median per
block of a second (loadgen/load.js). Two paths are compared block by block,
at the same instant, so the machine's swings, which move every path alike
within a second, cancel.

Neighbouring blocks are not independent (the machine's state lasts longer
than a second), and a t-interval over correlated values is too narrow. So
the per-block differences are averaged over batches of k consecutive blocks
(the method of batch means), k the smallest for which the batch means' lag-1
autocorrelation is within the band white noise stays in 95% of the time
(2/sqrt(batches)), with at least MIN_BATCHES batches; the interval is a
t-interval over those batch means. The report states k and the
autocorrelation it measured. report/test_calibration.py holds the rule to its
error rates on the lab's own per-block values (report/testdata)."""
import math

from report.stats import t_interval
from report.values import div, mean

MIX = "mix"
# The fewest batches an interval is taken from (t with 9 degrees of freedom).
MIN_BATCHES = 10
# A block's median from fewer requests than this is left out of the pairing.
MIN_BLOCK_REQUESTS = 5


def mixed_phase(load, workload):
    """The workload's measured interleaved phase in load.json, or None."""
    return next((p for p in load.get("phases") or []
                 if p.get("path") == MIX and p.get("round", 0) > 0 and p["workload"] == workload), None)


def blocks(phase):
    """{path: [client p50 in ms, or None, per block]} of an interleaved phase."""
    return {path: [b["p50"] if b["requests"] >= MIN_BLOCK_REQUESTS else None for b in v["blocks"]]
            for path, v in (phase.get("by_path") or {}).items()}


def lag1(xs):
    """The lag-1 autocorrelation of a series (0 where it has no spread)."""
    n = len(xs)
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs)
    if n < 3 or var == 0:
        return 0.0
    return sum((xs[i] - m) * (xs[i + 1] - m) for i in range(n - 1)) / var


def batch(xs, min_batches=MIN_BATCHES):
    """(k, batch means, their lag-1 autocorrelation, settled): the smallest
    batch length k whose means' autocorrelation is inside 2/sqrt(batches), or
    the longest that still gives min_batches (settled False). None when xs
    has fewer than min_batches values."""
    if len(xs) < min_batches:
        return None
    out = None
    for k in range(1, len(xs) // min_batches + 1):
        n = len(xs) // k
        means = [sum(xs[i * k:(i + 1) * k]) / k for i in range(n)]
        r = lag1(means)
        out = (k, means, r, r <= 2 / math.sqrt(n))
        if out[3]:
            return out
    return out


def block_diff(by_path, a, b, less=None, scale=1e3, block_s=1):
    """The per-block difference a - b (less (c - d): a difference in
    differences), times scale, judged over batch means: a stats dict of the
    shape report/stats.py's diff_stats gives (rounds: the batches), or None
    where a path is missing or too few blocks have every value."""
    names = [a, b, *(less or [])]
    if any(p not in by_path for p in names):
        return None
    series = [by_path[p] for p in names]
    xs, av, bv = [], [], []
    for vals in zip(*series):
        if any(v is None for v in vals):
            continue
        x = vals[0] - vals[1] - ((vals[2] - vals[3]) if less else 0)
        xs.append(scale * x)
        av.append(scale * vals[0])
        bv.append(scale * vals[1])
    chosen = batch(xs)
    if chosen is None:
        return None
    k, means, r, settled = chosen
    m, lo, hi, p = t_interval(means)
    secs = k * block_s
    return {"mean": m, "lo": lo, "hi": hi, "p": p, "min": min(means), "max": max(means), "rounds": len(means),
            "over": f"blocks of {secs} s" if k == 1 else f"batches of {secs} s", "blocks": len(xs), "block_s": block_s, "batch_blocks": k,
            "autocorrelation": round(r, 3), "autocorrelation_blocks": round(lag1(xs), 3), "settled": settled,
            "a_mean": mean(av), "b_mean": mean(bv), "relative": div(m, mean(av)), "resolution": None,
            "method": METHOD, "per_round": {str(i + 1): v for i, v in enumerate(means)}}


METHOD = "paired per block of one interleaved stream, t-interval over batch means"


def summary(phase):
    """Each path's figures over the interleaved phase: requests, failed share,
    client p50 and p99 (ms), and its blocks with a median."""
    out = {}
    for path, v in (phase.get("by_path") or {}).items():
        d = v.get("duration_ms") or {}
        out[path] = {"requests": v["requests"], "rps": div(v["requests"], phase["duration_s"]),
                     "failed_rate": v["failed_rate"], "client_p50_ms": d.get("p50"), "client_p99_ms": d.get("p99"),
                     "blocks": sum(1 for b in v["blocks"] if b["requests"] >= MIN_BLOCK_REQUESTS)}
    return out


def describe(terms):
    """The method in a sentence, with the batch lengths and autocorrelations the
    answer's comparisons had (terms: breakdown() with block figures)."""
    ds = [t["figures"].get("client_p50_ms") for t in terms.values()]
    ds = [d for d in ds if d and d.get("blocks")]
    if not ds:
        return ""
    ks = sorted({d["batch_blocks"] * d["block_s"] for d in ds})
    r1 = max(d["autocorrelation_blocks"] for d in ds)
    unsettled = [d for d in ds if not d["settled"]]
    out = (f"Each interval is a 95% t-interval over batch means: the paths' client medians paired second by second "
           f"in one interleaved stream ({ds[0]['blocks']} blocks of {ds[0]['block_s']} s), averaged over batches of "
           f"{'/'.join(map(str, ks))} s, the shortest whose means showed no lag-1 autocorrelation (the 1 s "
           f"differences' was at most {r1:.2f})")
    if unsettled:
        out += f"; {len(unsettled)} comparison(s) kept some autocorrelation even at {MIN_BATCHES} batches: their intervals may be too narrow"
    return out
