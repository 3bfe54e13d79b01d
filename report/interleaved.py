"""make load's interleaved stream (pure): one arrival stream whose requests
went to every path in a balanced random order, each path's client median per
block of a second (loadgen/load.js). Two paths are compared block by block,
at the same instant, so the machine's swings, which move every path alike
within a second, cancel.

Neighbouring blocks are not independent (the machine's state outlasts a
second), and a t-interval that takes them as independent is too narrow where
they correlate and too wide where they alternate. So the mean difference's
standard error is Newey and West's (heteroskedasticity and autocorrelation
consistent): the differences' autocovariances up to a lag L, weighted down
linearly (Bartlett), L = floor(4 (n/100)^(2/9)) for n blocks (3 for 60),
with a t-quantile on n - 1 degrees of freedom. The report states n, L and the
lag-1 autocorrelation it measured. report/test_calibration_lab.py holds the
rule to its error rates on the lab's own per-block values (report/testdata):
batch means, tried first, were conservative there (97.5% coverage: the lab's
1 s differences alternate slightly, lag-1 about -0.06), Newey-West 95.8%.
Hand-written (ten lines): scipy has no HAC standard error, and statsmodels,
which has, would bring pandas into the report's image."""
import math

from scipy import stats as sps

from report.stats import ALPHA
from report.values import div, mean

MIX = "mix"
# The fewest blocks an interval is taken from.
MIN_BLOCKS = 10
# A block's median from fewer requests than this is left out of the pairing
# (its successful ones, where the generator counts its failures: openloop
# times only successes).
MIN_BLOCK_REQUESTS = 5


def mixed_phase(load, workload):
    """The workload's measured interleaved phase in load.json, or None."""
    return next((p for p in load.get("phases") or []
                 if p.get("path") == MIX and p.get("round", 0) > 0 and p["workload"] == workload), None)


def timed(block):
    """A block's requests its median is from: its successful ones (openloop
    counts its failures, k6 did not and timed them all)."""
    return block["requests"] - (block.get("failed") or 0)


def blocks(phase):
    """{path: [client p50 in ms, or None, per block]} of an interleaved phase."""
    return {path: [b["p50"] if timed(b) >= MIN_BLOCK_REQUESTS else None for b in v["blocks"]]
            for path, v in (phase.get("by_path") or {}).items()}


def lag1(xs):
    """The lag-1 autocorrelation of a series (0 where it has no spread)."""
    n = len(xs)
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs)
    if n < 3 or var == 0:
        return 0.0
    return sum((xs[i] - m) * (xs[i + 1] - m) for i in range(n - 1)) / var


def hac_lag(n):
    """Newey and West's rule for the lag of n values: floor(4 (n/100)^(2/9))."""
    return max(1, math.floor(4 * (n / 100) ** (2 / 9)))


def hac_interval(xs):
    """(mean, low, high, p, lag) of a series' mean at CONFIDENCE, its standard
    error Newey-West's; None under MIN_BLOCKS values. No spread: no interval
    (low, high and p None)."""
    n = len(xs)
    if n < MIN_BLOCKS:
        return None
    lag = hac_lag(n)
    m = sum(xs) / n
    d = [x - m for x in xs]
    gamma = [sum(d[i] * d[i + j] for i in range(n - j)) / n for j in range(lag + 1)]
    var = gamma[0] + 2 * sum((1 - j / (lag + 1)) * gamma[j] for j in range(1, lag + 1))
    if var <= 1e-18 * max(1.0, m * m):  # no spread: no interval (as report/stats.py's t_interval)
        return m, None, None, None, lag
    se = math.sqrt(var / n)
    q = sps.t.ppf(1 - ALPHA / 2, n - 1)
    return m, m - q * se, m + q * se, float(2 * sps.t.sf(abs(m) / se, n - 1)), lag


def block_diff(by_path, a, b, less=None, scale=1e3, block_s=1):
    """The per-block difference a - b (less (c - d): a difference in
    differences), times scale, with its Newey-West interval: a stats dict of
    the shape report/stats.py's diff_stats gives (rounds: the blocks), or None
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
    got = hac_interval(xs)
    if got is None:
        return None
    m, lo, hi, p, lag = got
    return {"mean": m, "lo": lo, "hi": hi, "p": p, "min": min(xs), "max": max(xs), "rounds": len(xs),
            "over": f"blocks of {block_s} s", "blocks": len(xs), "block_s": block_s, "lag": lag,
            "autocorrelation_blocks": round(lag1(xs), 3), "a_mean": mean(av), "b_mean": mean(bv),
            "relative": div(m, mean(av)), "resolution": None, "method": METHOD,
            # Blocks some path had no median in (fewer than MIN_BLOCK_REQUESTS requests): counted, and said.
            "dropped": max(len(s) for s in series) - len(xs),
            "dropped_why": f"a path with fewer than {MIN_BLOCK_REQUESTS} requests in the block",
            "per_round": {str(i + 1): v for i, v in enumerate(xs)}}


METHOD = "paired per block of one interleaved stream, t-interval with a Newey-West standard error"


def summary(phase):
    """Each path's figures over the interleaved phase: requests, failed share,
    client p50 and p99 (ms), and its blocks with a median."""
    out = {}
    for path, v in (phase.get("by_path") or {}).items():
        d = v.get("duration_ms") or {}
        out[path] = {"requests": v["requests"], "rps": div(v["requests"], phase["duration_s"]),
                     "failed_rate": v["failed_rate"], "client_p50_ms": d.get("p50"), "client_p99_ms": d.get("p99"),
                     "blocks": sum(1 for b in v["blocks"] if timed(b) >= MIN_BLOCK_REQUESTS)}
    return out


def describe(terms):
    """The method in a sentence, with the lag and the largest lag-1
    autocorrelation the answer's comparisons had (terms: breakdown() with block figures)."""
    ds = [t["figures"].get("client_p50_ms") for t in terms.values()]
    ds = [d for d in ds if d and d.get("blocks")]
    if not ds:
        return ""
    r1 = max(d["autocorrelation_blocks"] for d in ds)
    return (f"Each interval is a 95% t-interval on the paths' client medians paired second by second in one "
            f"interleaved stream ({ds[0]['blocks']} blocks of {ds[0]['block_s']} s), its standard error "
            f"Newey-West's (autocovariances to lag {ds[0]['lag']}: the 1 s differences' lag-1 autocorrelation was "
            f"at most {r1:.2f})")
