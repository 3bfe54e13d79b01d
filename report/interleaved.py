"""make load's interleaved stream (pure): one arrival stream whose requests
went to every path in a balanced random order, each path's client median per
block of a second (loadgen/load.js). Two paths are compared block by block,
at the same instant, so the machine's swings, which move every path alike
within a second, cancel.

Neighbouring blocks are not independent (the machine's state outlasts a
second), and a t-interval that takes them as independent is too narrow where
they correlate and too wide where they alternate. So the mean difference's
standard error is the equal-weighted cosine (EWC) estimator's (Lazarus,
Lewis, Stock and Watson, "HAR Inference: Recommendations for Practice",
2018): the long-run variance from the differences' first nu cosine
transforms, nu = floor(0.4 n^(2/3)) for n blocks (6 for 60), with a
t-quantile on nu degrees of freedom. Chosen by simulation through this code
(docs/statistics.md has the table): at every INTERLEAVE from 10 to 120 it
kept the A/A rate at 4.6-5.1% with independent and heavy-tailed seconds and
3.6-4.8% on the lab's own, where the Newey-West interval it replaces called
6-11% of A/A pairs different (8% at 20 blocks); with seconds correlated at
lag 1 (0.3: 5.3%, 0.6: 6.3%) it holds best of the methods tried. The report
states n, nu and the lag-1 autocorrelation it measured. Hand-written (ten
lines): scipy has no such estimator, and statsmodels would bring pandas into
the report's image."""
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
    """The workload's measured interleaved stream in load.json as one phase
    (combine()), or None."""
    return combine([p for p in load.get("phases") or []
                    if p.get("path") == MIX and p.get("round", 0) > 0 and p["workload"] == workload])


def combine(streams):
    """A workload's (or a sweep step's) measured interleaved streams as one
    phase: the one stream itself, or, where the run has one per connection
    handling (loadgen/plan.py's streams), their paths side by side (each path
    in one stream; block b of each is second b of its own stream), their
    requests, drops and statuses added, their failed and late shares over
    all their requests, their length summed from the first one's start, and
    "streams" naming each with its paths (a replay's routes, each path's
    figures its stream's); None where there is none. Their
    durations over the stream are left out (the pooled requests' quantiles
    are no function of each stream's: each path's are in by_path), as is
    which stream (it is all of them)."""
    if len(streams) < 2:
        return streams[0] if streams else None
    requests = sum(p.get("requests") or 0 for p in streams)

    def share(key):  # of all the streams' requests; None where a stream has none (k6's late_rate)
        shares = [(p.get(key), p.get("requests") or 0) for p in streams]
        if any(r is None for r, _ in shares):
            return None
        return sum(r * n for r, n in shares) / requests if requests else 0.0

    statuses = {}
    for p in streams:
        for k, n in (p.get("statuses") or {}).items():
            statuses[k] = statuses.get(k, 0) + n
    first = {k: v for k, v in streams[0].items()
             if k not in ("duration_ms", "scheduled_ms", "queue_ms", "first_byte_ms", "hdr", "stream", "by_route")}
    # A replay's routes: the same in every stream, each path's figures its own stream's.
    routes = ([{"route": rs[0]["route"], "by_path": {p: v for r in rs for p, v in r["by_path"].items()}}
               for rs in zip(*(p["by_route"] for p in streams))] if all("by_route" in p for p in streams) else None)
    return {**first, "name": ", ".join(p["name"] for p in streams),
            **({"by_route": routes} if routes is not None else {}),
            "by_path": {path: v for p in streams for path, v in (p.get("by_path") or {}).items()},
            "paths": [path for p in streams for path in p.get("paths") or p.get("by_path") or []],
            "start_offset_s": min(p.get("start_offset_s", 0) for p in streams),
            "duration_s": sum(p["duration_s"] for p in streams), "requests": requests,
            "dropped_iterations": sum(p.get("dropped_iterations") or 0 for p in streams),
            **({"connections_opened": sum(p.get("connections_opened") or 0 for p in streams)}
               if any("connections_opened" in p for p in streams) else {}),
            "failed_rate": share("failed_rate"), "late_rate": share("late_rate"),
            **({"statuses": statuses} if any("statuses" in p for p in streams) else {}),
            "streams": [{"name": p["name"], "stream": p.get("stream"), "paths": list(p.get("by_path") or []),
                         "duration_s": p["duration_s"]} for p in streams]}


def names(mixed):
    """The phases an interleaved stream (combine()'s) was measured in."""
    return [s["name"] for s in mixed["streams"]] if mixed.get("streams") else [mixed["name"]]


def across(mixed, paths):
    """Whether paths were measured in different streams of one (combine()'s)."""
    where = {p: s["name"] for s in mixed.get("streams") or [] for p in s["paths"]}
    return len({where.get(p) for p in paths}) > 1


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


def dof(n):
    """The degrees of freedom of the interval over n blocks: Lazarus, Lewis,
    Stock and Watson's rule for the equal-weighted cosine estimator,
    floor(0.4 n^(2/3)) (1, 2, 3, 6, 9 at 10, 20, 30, 60, 120 blocks)."""
    return max(1, math.floor(0.4 * n ** (2 / 3)))


def ewc_interval(xs):
    """(mean, low, high, p, dof) of a series' mean at CONFIDENCE, its standard
    error the equal-weighted cosine (EWC) estimator's: the long-run variance
    as the mean square of the series' first dof(n) cosine transforms,
    sqrt(2/n) sum_t x_t cos(pi j (t - 1/2) / n), with a t-quantile on dof(n)
    degrees of freedom (exactly t for independent normal values). None under
    MIN_BLOCKS values; no spread: no interval (low, high and p None)."""
    n = len(xs)
    if n < MIN_BLOCKS:
        return None
    nu = dof(n)
    m = sum(xs) / n
    d = [x - m for x in xs]
    lam = [math.sqrt(2 / n) * sum(v * math.cos(math.pi * j * (t + 0.5) / n) for t, v in enumerate(d))
           for j in range(1, nu + 1)]
    omega = sum(v * v for v in lam) / nu
    if omega <= 1e-18 * max(1.0, m * m):  # no spread: no interval (as report/stats.py's t_interval)
        return m, None, None, None, nu
    se = math.sqrt(omega / n)
    q = sps.t.ppf(1 - ALPHA / 2, nu)
    return m, m - q * se, m + q * se, float(2 * sps.t.sf(abs(m) / se, nu)), nu


def block_diff(by_path, a, b, less=None, scale=1e3, block_s=1):
    """The per-block difference a - b (less (c - d): a difference in
    differences), times scale, with its interval (ewc_interval): a stats dict of
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
    got = ewc_interval(xs)
    if got is None:
        return None
    m, lo, hi, p, nu = got
    return {"mean": m, "lo": lo, "hi": hi, "p": p, "min": min(xs), "max": max(xs), "rounds": len(xs),
            "over": f"blocks of {block_s} s", "blocks": len(xs), "block_s": block_s, "dof": nu,
            "autocorrelation_blocks": round(lag1(xs), 3), "a_mean": mean(av), "b_mean": mean(bv),
            "relative": div(m, mean(av)), "resolution": None, "method": METHOD,
            # Blocks some path had no median in (fewer than MIN_BLOCK_REQUESTS requests): counted, and said.
            "dropped": max(len(s) for s in series) - len(xs),
            "dropped_why": f"a path with fewer than {MIN_BLOCK_REQUESTS} requests in the block",
            "per_round": {str(i + 1): v for i, v in enumerate(xs)}}


METHOD = ("paired per block of one interleaved stream, t-interval with an equal-weighted cosine (EWC) standard error "
          "and floor(0.4 n^(2/3)) degrees of freedom")


# The quantiles of each path's successful requests over the stream (ms; the
# generator's own, from its histogram): the report's percentile plot.
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def summary(phase):
    """Each path's figures over the interleaved phase: requests and requests/s
    (over its own stream, where the phase is combine()'s), failed share, client
    quantiles (ms; p50 and p99 by name, all of QUANTILES under "quantiles_ms"),
    and its blocks with a median."""
    length = {p: s["duration_s"] for s in phase.get("streams") or [] for p in s["paths"]}
    out = {}
    for path, v in (phase.get("by_path") or {}).items():
        d = v.get("duration_ms") or {}
        out[path] = {"requests": v["requests"], "rps": div(v["requests"], length.get(path, phase["duration_s"])),
                     "failed_rate": v["failed_rate"], "client_p50_ms": d.get("p50"), "client_p99_ms": d.get("p99"),
                     "quantiles_ms": {q: d.get(q) for q in QUANTILES},
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
    return (f"Each interval is a 95% t-interval on the paths' client medians paired second by second in their "
            f"interleaved stream ({ds[0]['blocks']} blocks of {ds[0]['block_s']} s), its standard error the "
            f"equal-weighted cosine estimator's ({ds[0]['dof']} degrees of freedom, which allow for neighbouring "
            f"seconds that move together: the 1 s differences' lag-1 autocorrelation was at most {r1:.2f})")
