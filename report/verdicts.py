"""The answer's verdict on one comparison (pure): faster or slower (measurable
once the answer's comparisons are judged together), no difference larger
than the margin (equivalence: the interval widened for the comparisons
judged together lies inside it), or not sure yet, with the run that would
decide it with chance POWER (report/test_calibration_projection.py holds
it to that)."""
import math

import numpy as np
from scipy import stats as sps

from report import interleaved
from report.stats import ALPHA, lost_to, measurable

# The longest stream (seconds) and the most rounds a "not sure yet" names.
MOST_TO_DECIDE = 3600


MOST_ROUNDS_TO_DECIDE = 100


# The chance with which the length a "not sure yet" names must decide
# (report/test_calibration_projection.py holds it to that).
POWER = 0.8


# The fewest degrees of freedom a projection is made from: with 2 (20 blocks,
# 3 rounds) the measured spread itself is too uncertain to say how long
# would decide.
MIN_DOF_TO_PROJECT = 3


def dof_of(d, n=None):
    """The degrees of freedom of a difference's t-interval at n values (its own
    by default): the stream's rule for its blocks, n - 1 for rounds."""
    n = n or d["rounds"]
    return interleaved.dof(n) if d.get("blocks") else n - 1


def half_width(d, n=None, k=1):
    """The half-width of d's interval at n values with its spread, at 1 -
    ALPHA/k (Bonferroni over k comparisons judged together)."""
    own = dof_of(d)
    se = (d["hi"] - d["lo"]) / 2 / sps.t.ppf(1 - ALPHA / 2, own)  # the standard error at its own n
    n = n or d["rounds"]
    return sps.t.ppf(1 - ALPHA / (2 * k), dof_of(d, n)) * se * math.sqrt(d["rounds"] / n)


def chance_to_decide(d, n, margin, k, grid=32):
    """The chance that a new run of n values (usable blocks or rounds) decides
    d's comparison (its interval at 1 - ALPHA/k excludes 0, or lies inside
    ±margin) if the true difference is the one measured: its mean normal
    about that, its standard error this run's scaled to n but itself
    uncertain as this run measured it (true variance s² ν₀ / χ²(ν₀)), and the
    new run's own estimate of it a χ²(ν)/ν draw on n's degrees of freedom,
    independent of its mean (exactly so for normal values). A grid of
    quantiles over both spreads; the mean's chance in closed form: the run
    stays undecided only where margin - h <= |mean| <= h."""
    q = (np.arange(grid) + 0.5) / grid
    nu0, nu = dof_of(d), dof_of(d, n)
    se_now = half_width(d) / sps.t.ppf(1 - ALPHA / 2, nu0)
    s = (se_now * math.sqrt(d["rounds"] / n) * np.sqrt(nu0 / sps.chi2.ppf(q, nu0)))[:, None]
    h = sps.t.ppf(1 - ALPHA / (2 * k), nu) * s * np.sqrt(sps.chi2.ppf(q, nu) / nu)[None, :]
    m, lo = abs(d["mean"]), np.maximum(margin - h, 0.0)
    undecided = (sps.norm.cdf((h - m) / s) - sps.norm.cdf((lo - m) / s)
                 + sps.norm.cdf((-lo - m) / s) - sps.norm.cdf((-h - m) / s))
    return float(1 - np.where(h > lo, undecided, 0.0).mean())


def to_decide(d, margin, k):
    """How many values in all (usable blocks or rounds) would decide a
    difference that is neither measurable nor inside ±margin (its units)
    with chance POWER if the true difference is the one measured
    (chance_to_decide); None where its degrees of freedom are under
    MIN_DOF_TO_PROJECT or beyond MOST_TO_DECIDE (MOST_ROUNDS_TO_DECIDE)."""
    if dof_of(d) < MIN_DOF_TO_PROJECT:
        return None
    n0 = d["rounds"]
    most = max(n0 + 1, MOST_TO_DECIDE // (d.get("block_s") or 1) if d.get("blocks") else MOST_ROUNDS_TO_DECIDE)
    decides = lambda n: chance_to_decide(d, n, margin, k) >= POWER  # noqa: E731
    lo, hi = n0, n0 + 1
    while not decides(hi):  # doubling, then halving: the chance grows with n
        if hi >= most:
            return None
        lo, hi = hi, min(most, n0 + 2 * (hi - n0))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return hi


def projected(d, n):
    """(length, more) of a run whose usable values number n: blocks or
    rounds lost in this run (d["dropped"]) are lost as often in it, so the
    length is n over this run's usable share (a stream's in seconds,
    INTERLEAVE; else rounds, ROUNDS), more what it adds to this run's."""
    had = d["rounds"] + (d.get("dropped") or 0)
    total = math.ceil(n * had / d["rounds"] - 1e-9)
    step = (d.get("block_s") or 1) if d.get("blocks") else 1
    return total * step, (total - had) * step


def inside_margin(d, margin, k):
    """Whether d's interval, widened for the k comparisons judged together
    (Bonferroni), lies strictly inside ±margin (its units): equivalence, TOST."""
    half = half_width(d, k=k)
    return bool(margin) and bool(-margin < d["mean"] - half and d["mean"] + half < margin)


def lost_to_holm(d):
    """A difference whose own interval excludes zero but that Holm's correction
    over the answer's comparisons does not call measurable."""
    return lost_to(d) == "holm"


def three_way(d, margin_pct, k):
    """The answer's verdict on one comparison: "differs" (measurable once the
    answer's comparisons are judged together), "same" (not measurable, its
    interval inside the margin: inside_margin()), or "unsure"; with the
    margin in µs, inside_margin (a difference inside the margin is both
    "differs" and inside it: the verdict says both) and, when unsure, how
    many values in all would decide with chance POWER (to_decide)."""
    margin = margin_pct / 100 * abs(d.get("a_mean") or 0)
    inside = inside_margin(d, margin, k)
    if measurable(d) and not lost_to_holm(d) and lost_to(d) != "fdr":  # nor taken back by the report's (judged_together)
        return {"verdict": "differs", "margin": margin, "inside_margin": inside}
    half = half_width(d, k=k)
    if inside:
        return {"verdict": "same", "margin": margin, "inside_margin": True,
                "widened": (d["mean"] - half, d["mean"] + half)}
    return {"verdict": "unsure", "margin": margin, "inside_margin": False, "to_decide": to_decide(d, margin, k)}
