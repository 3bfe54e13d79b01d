"""The interleaved verdict (report/interleaved.py) held to its error rates on
the lab's own seconds, not on normal draws: report/testdata/interleaved.json
keeps every path's median per 1 s block from real `make load` runs of all
ten paths (report/blocks_data.py wrote it; docs/statistics.md says how they
ran). In each run `uds-aa` and `uds-lo-aa` are the socket paths under a
second name, so uds/uds-aa and uds-lo/uds-lo-aa are A/A pairs measured with
the machine's real swings, tails and autocorrelation.

Beyond the real runs themselves (too few for a sharp error rate), the tests
build pseudo-runs by a block bootstrap of the real A/A difference series:
stretches of consecutive seconds (their autocorrelation kept) from the real
runs, joined to the length of a run, each stretch with its labels swapped at
random (the twins are exchangeable under no difference). The rule must call
at most 5% of them measurable at every stream length INTERLEAVE allows (10
s up) and the runs' own (60 s), and a known multiplicative shift must fall
inside the 95% interval 93-97% of the time. The answer pairs' own seconds,
each pair's run mean taken away (no difference left, their real noise and
autocorrelation kept), are held to the same 5%."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from report import stats
from report.interleaved import block_diff
from report.stats import ALPHA

DATA = json.loads((Path(__file__).parent / "testdata" / "interleaved.json").read_text())
AA = [("uds", "uds-aa"), ("uds-lo", "uds-lo-aa")]
PSEUDO = 2000
# Stretches of this many seconds on average (geometric lengths): long enough
# to carry the autocorrelation the lab has at a few seconds.
MEAN_STRETCH = 10


def aa_series(rate=None):
    """Every real A/A pair's per-block medians (µs), as (a, b) lists."""
    out = []
    for run in DATA["runs"]:
        if rate is not None and run["rate"] != rate:
            continue
        for a, b in AA:
            if a in run["blocks_us"] and b in run["blocks_us"]:
                out.append((run["blocks_us"][a], run["blocks_us"][b]))
    return out


def called(a, b):
    """Whether the rule calls a - b measurable."""
    d = block_diff({"a": a, "b": b}, "a", "b", scale=1.0)
    return d is not None and d["p"] is not None and d["p"] < ALPHA


def pseudo_run(rng, series, n):
    """n seconds stitched from stretches of the real series, each stretch from
    a random run and offset, its two paths swapped half the time."""
    a_out, b_out = [], []
    while len(a_out) < n:
        a, b = series[rng.integers(len(series))]
        length = min(int(rng.geometric(1 / MEAN_STRETCH)), len(a))
        start = int(rng.integers(len(a) - length + 1))
        x, y = a[start:start + length], b[start:start + length]
        if rng.random() < 0.5:
            x, y = y, x
        a_out += x
        b_out += y
    return a_out[:n], b_out[:n]


def blocks_per_run():
    return len(DATA["runs"][0]["blocks_us"]["uds"])


def test_the_data_is_real_and_enough():
    series = aa_series()
    assert len(DATA["runs"]) >= 20 and len(series) >= 40
    assert all(len(a) == len(b) >= 30 for a, b in series)


def test_the_real_aa_runs_are_called_different_no_more_than_the_rule_allows():
    series = aa_series()
    hits = sum(called(a, b) for a, b in series)
    assert binomtest(hits, len(series), ALPHA, alternative="greater").pvalue > 0.01, (hits, len(series))


@pytest.mark.parametrize("n", [10, 20, None])
def test_pseudo_aa_runs_from_the_labs_seconds_are_called_different_at_most_5_percent(n):
    """At the shortest streams plan.py allows (INTERLEAVE=10, 20) and the runs' own length."""
    rng = np.random.default_rng(29)
    series, n = aa_series(), n or blocks_per_run()
    hits = sum(called(*pseudo_run(rng, series, n)) for _ in range(PSEUDO))
    assert binomtest(hits, PSEUDO, ALPHA, alternative="greater").pvalue > 0.01, hits / PSEUDO


# The answer's pairs (catalogue.json's answer terms in Compose), TCP first.
ANSWER = [("tcp-lo", "uds-lo"), ("tcp-lo-ka", "uds-lo-ka"), ("tcp", "uds"), ("tcp-ka", "uds-ka")]


def answer_residuals():
    """Every real run's answer pairs as (a, b) with b shifted by the pair's mean
    difference over the run: no difference left, the pair's own noise kept."""
    out = []
    for run in DATA["runs"]:
        for a, b in ANSWER:
            x, y = run["blocks_us"][a], run["blocks_us"][b]
            m = float(np.mean([p - q for p, q in zip(x, y) if p is not None and q is not None]))
            out.append((x, [None if v is None else v + m for v in y]))
    return out


@pytest.mark.parametrize("n", [20, None])
def test_the_answer_pairs_own_seconds_less_their_difference_are_called_different_at_most_5_percent(n):
    """The answer's pairs have positive lag-1 autocorrelation (the A/A twins'
    alternate), which a rule tested on the twins alone could miss."""
    rng = np.random.default_rng(31)
    series, n = answer_residuals(), n or blocks_per_run()
    hits = sum(called(*pseudo_run(rng, series, n)) for _ in range(PSEUDO))
    assert binomtest(hits, PSEUDO, ALPHA, alternative="greater").pvalue > 0.01, hits / PSEUDO


def test_a_known_shift_falls_inside_the_interval_93_to_97_percent_of_the_time():
    """One path 3% slower than its twin, multiplied in (each second's median
    times 1.03), against 3% of the path's median over every real run: the
    interval must hold that, the run's own mean varying around it (an added
    constant would make this the A/A test again)."""
    rng = np.random.default_rng(30)
    series, n = aa_series(), blocks_per_run()
    shift = 0.03 * float(np.mean([v for a, _ in series for v in a if v is not None]))
    held = 0
    for _ in range(PSEUDO):
        a, b = pseudo_run(rng, series, n)
        d = block_diff({"a": [None if v is None else 1.03 * v for v in a], "b": b}, "a", "b", scale=1.0)
        held += d["lo"] <= shift <= d["hi"]
    assert 0.93 <= held / PSEUDO <= 0.97, held / PSEUDO


def test_batch_means_would_have_been_too_wide_on_the_same_seconds():
    """The rule first tried, batch means with their length from the measured
    lag-1 autocorrelation, held the shift 97.5% of the time here: it treats
    the lab's alternating seconds as independent. Kept as the reason for a
    standard error that allows for neighbouring seconds: on these values a
    plain t-interval must not reach the band."""
    rng = np.random.default_rng(30)
    series, n = aa_series(), blocks_per_run()
    held = 0
    for _ in range(PSEUDO):
        a, b = pseudo_run(rng, series, n)
        x = [p - q for p, q in zip(a, b) if p is not None and q is not None]
        lo, hi = stats.t_interval(x)[1:3]
        held += lo <= 0 <= hi
    assert held / PSEUDO > 0.97, held / PSEUDO


def found_in_real_runs(shift, apart):
    """How many real A/A runs the rule finds a known shift in (its interval
    wholly above zero), with one twin's seconds paired `apart` seconds later:
    0 is the interleaved stream's pairing, the same instant; the design
    before it paired a round's phases up to 42 s apart. Each pairing over the
    same number of seconds (the run's length less 20)."""
    found, runs = 0, aa_series()
    for a, b in runs:
        n = len(a) - 20
        x, y = a[:n], b[apart:apart + n]
        s = shift * float(np.nanmean([v for v in x if v is not None]))
        d = block_diff({"a": [None if v is None else v + s for v in x], "b": y}, "a", "b", scale=1.0)
        found += d["p"] is not None and d["p"] < ALPHA and d["lo"] > 0
    return found, len(runs)


def test_a_3_percent_difference_is_found_in_at_least_80_percent_of_the_real_runs():
    """Power on the lab's own seconds: 39 of 40 here. Pairing the twins 20 s
    apart, as the design before paired phases, finds it in 14 of 40 (the
    interval four times wider): this test fails on that pairing (APART=20)."""
    found, n = found_in_real_runs(0.03, apart=0)
    assert found >= 0.8 * n, (found, n)


@pytest.mark.parametrize("apart", [10, 20])
def test_pairing_seconds_apart_as_the_old_design_did_finds_it_in_under_half(apart):
    """Kept as the reason for the same-instant pairing: on the same values,
    seconds paired 10 or 20 s apart miss a 3% difference most of the time."""
    found, n = found_in_real_runs(0.03, apart=apart)
    assert found < 0.5 * n, (found, n)
