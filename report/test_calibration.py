"""Calibration of the verdict rule (report/stats.py) on simulated paired rounds,
seeded so that every run of the test sees the same draws: with no true
difference it may call a difference measurable in at most 5% of runs (its
nominal error rate, within the simulation's own sampling error), and with a
true 10% difference 12 rounds must find it in at least 80%. Normal noise makes
a t-test exact by construction: these check the arithmetic of the rounds'
rule, not the lab's noise (make load's answer comes from its interleaved
stream: report/test_interleaved.py).

The noise is this VM's: its speed swings +-15% from one minute to the next
(a factor per round, shared by the paths of that round, drawn uniformly), and
each phase on top of that varies on its own by +-15% (two standard deviations
of a normal factor). Pairing by round cancels the first; the second is what
the intervals must carry."""
import numpy as np
import pytest
from scipy.stats import binomtest

from report.breakdown import breakdown
from report.words import fmt_diff
from report.interleaved import block_diff
from report.stats import diff_stats, fmt_interval, judge, measurable, ratio_stats, significant, verdict

RUNS = 1000
AA_RUNS = 2000
ROUND_SWING = 0.15
PHASE_SD = 0.075


def paired_rounds(rng, rounds, effect, base=500.0):
    """{round: value} for path a and path b = a x (1 + effect), in paired rounds."""
    swing = 1 + rng.uniform(-ROUND_SWING, ROUND_SWING, rounds)
    a = base * swing * (1 + rng.normal(0, PHASE_SD, rounds))
    b = base * (1 + effect) * swing * (1 + rng.normal(0, PHASE_SD, rounds))
    return dict(enumerate(a, 1)), dict(enumerate(b, 1))


def share_called(rounds, effect, seed, judged, runs=RUNS):
    rng = np.random.default_rng(seed)
    return sum(judged(*paired_rounds(rng, rounds, effect)) for _ in range(runs)) / runs


DIFF = lambda a, b: measurable(diff_stats(a, b))  # noqa: E731
RATIO = lambda a, b: judge(ratio_stats(b, a)) == "clear"  # noqa: E731


@pytest.mark.parametrize("rounds", [2, 3, 5, 12])
@pytest.mark.parametrize("judged", [DIFF, RATIO], ids=["difference", "ratio"])
def test_no_true_difference_is_called_measurable_at_most_5_percent(rounds, judged):
    """A simulation's share is itself a sample: the rule fails when its share
    is significantly above 5% (one-sided binomial test at 1%). The old rule
    (every round on one side) called 2^(1-n): 50% at 2 rounds, 6.25% at 5."""
    share = share_called(rounds, 0.0, seed=rounds, judged=judged, runs=AA_RUNS)
    assert binomtest(round(share * AA_RUNS), AA_RUNS, 0.05, alternative="greater").pvalue > 0.01, share


@pytest.mark.parametrize("judged", [DIFF, RATIO], ids=["difference", "ratio"])
def test_twelve_rounds_find_a_true_10_percent_difference(judged):
    assert share_called(12, 0.10, seed=7, judged=judged) >= 0.80


def test_one_round_is_never_measurable():
    a, b = paired_rounds(np.random.default_rng(1), 1, 0.5)
    assert not measurable(diff_stats(a, b)) and judge(ratio_stats(b, a)) == "single"


def test_the_interval_holds_the_true_difference_in_95_percent_of_runs():
    rng = np.random.default_rng(11)
    held = 0
    for _ in range(RUNS):
        a, b = paired_rounds(rng, 12, 0.10)
        d = diff_stats(b, a)
        held += d["lo"] <= 50.0 <= d["hi"]  # the true difference: 10% of 500
    assert 0.93 <= held / RUNS <= 0.97


def test_a_difference_in_differences_cancels_the_nginx_instances():
    """bridge_new = (tcp - tcp-lo) - (uds - uds-lo): an instance offset that
    both pairs share (+40 on nginx) drops out; the bridge's own 100 remains."""
    rng = np.random.default_rng(3)
    phases = []
    for r in range(1, 13):
        swing = 1 + rng.uniform(-ROUND_SWING, ROUND_SWING)
        true = {"tcp": 0.640, "tcp-lo": 0.500, "uds": 0.440, "uds-lo": 0.400}  # ms; nginx +40 µs
        for path, v in true.items():
            phases.append({"workload": "ping", "path": path, "round": r,
                           "figures": {"client_p50_ms": v * swing * (1 + rng.normal(0, 0.01))}})
    d = breakdown(phases, "ping")["bridge_new"]["figures"]["client_p50_ms"]
    assert d["lo"] <= 100 <= d["hi"] and measurable(d)
    c = breakdown(phases, "ping")["control_new"]["figures"]["client_p50_ms"]
    assert c["lo"] <= 40 <= c["hi"]


def test_rounds_that_do_not_spread_give_no_interval():
    """The app's CPU per request moves in clock ticks: -40 µs in every round
    is one tick, quantisation; and two or more equal rounds have no spread, so
    no interval (the old rule gave them p = 0: measurable)."""
    a = {r: 120.0 for r in range(1, 13)}
    b = {r: 160.0 for r in range(1, 13)}
    d = diff_stats(a, b)
    assert d["lo"] is None and d["p"] is None and not measurable(d)
    assert fmt_interval(d) == "12 rounds, all equal: no interval"
    assert fmt_diff(d).endswith("(12 rounds, all equal: no interval, no verdict)")
    r = ratio_stats({1: 2.0, 2: 2.0}, {1: 1.0, 2: 1.0})
    assert judge(r) == "single" and "no interval" in verdict("uds", r)
    flat = block_diff({"a": [0.5] * 20, "b": [0.4] * 20}, "a", "b")
    assert flat["lo"] is None and not measurable(flat)


@pytest.mark.parametrize("sign", [1, -1])
def test_a_difference_must_exceed_its_resolution_whichever_way_it_points(sign):
    """Exactly one step of the counter is not a measurement (strict), and a
    difference where the socket costs more is judged as one where it saves."""
    a = {r: 0.0 for r in range(1, 13)}
    b = {r: sign * (40.0 + (1 if r % 2 else -1)) for r in range(1, 13)}  # mean exactly 40, spread 1
    d = diff_stats(b, a, resolution=40.0)
    assert d["mean"] == pytest.approx(sign * 40.0) and significant(d)
    assert not measurable(d)
    assert measurable(diff_stats(b, a, resolution=39.0))
    assert not measurable(diff_stats(b, a, resolution=41.0))


def test_rounds_left_out_are_counted_and_said():
    """A round some path lacks, or a ratio of 0 or below (the host's switches
    above idle can be negative), is left out of the pairing: counted, and the
    interval says so."""
    r = ratio_stats({1: 1.0, 2: 1.1, 3: -0.2, 4: 1.05}, {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0})
    assert r["rounds"] == 3 and r["dropped"] == 1
    assert "3 rounds; 1 left out: a value missing, or a ratio of 0 or below" in fmt_interval(r, times=True)
    d = diff_stats({1: 1.0, 2: 1.2, 3: 1.1}, {1: 0.5, 2: 0.6, 3: None})
    assert d["rounds"] == 2 and d["dropped"] == 1 and "1 left out: a value missing" in fmt_interval(d)
