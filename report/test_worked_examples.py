"""The report's arithmetic on short fixed inputs, against values worked out
by hand (the working is in each test's docstring) and checked once against an
independent implementation: statsmodels 0.15.0 (its HAC standard error of a
mean, multipletests' holm and fdr_bh) and scipy's ttest_1samp. t-quantiles
are the table's: t(0.975, 1) = 12.7062047, t(0.975, 3) = 3.1824463,
t(0.975, 9) = 2.2621572. The calibration tests (test_calibration*.py) hold
the rules to their error rates; these hold each function to its formula, so
a slip in one line (a weight, a sign, an index, a boundary) fails here by name."""
import math

import pytest

from report import breakdown, interleaved, stats, verdicts, words


# --- report/interleaved.py: the pairing (its interval, ewc_interval, is pinned in test_answer_holds.py) ---

XS = [1, 3, 2, 5, 4, 6, 5, 8, 7, 9]


def test_lag1_worked_example():
    """mean 5; deviations -4 -2 -3 0 -1 1 0 3 2 4: lag-1 sum 27 over the squares' 60."""
    assert interleaved.lag1(XS) == pytest.approx(0.45, abs=1e-12)
    assert interleaved.lag1([2.0, 2.0, 2.0]) == 0.0 and interleaved.lag1([1.0, 2.0]) == 0.0


def test_block_diff_pairs_the_blocks_worked_example():
    """block_diff of two paths whose per-block difference is XS: the pairing's
    own figures (its interval is ewc_interval's, pinned in test_answer_holds.py)."""
    d = interleaved.block_diff({"a": [x + 1.0 for x in XS], "b": [1.0] * 10}, "a", "b", scale=1.0)
    assert d["mean"] == pytest.approx(5) and d["per_round"] == {str(i + 1): pytest.approx(x) for i, x in enumerate(XS)}
    assert (d["blocks"], d["rounds"], d["autocorrelation_blocks"], d["dropped"]) == (10, 10, 0.45, 0)
    assert (d["min"], d["max"], d["a_mean"], d["b_mean"]) == pytest.approx((1, 9, 6, 1))
    assert d["relative"] == pytest.approx(5 / 6) and d["lo"] < 5 < d["hi"]


def test_a_series_with_no_spread_gives_no_interval_whatever_its_rounding():
    """0.1 + 0.2 is 0.30000000000000004: a spread of rounding, not of
    measurement. Equal values computed two ways are equal: no interval (a
    test of float equality would give one, with a p of about 0)."""
    same = [0.3, 0.1 + 0.2, 0.3, 0.3, 0.1 + 0.2, 0.3, 0.3, 0.3, 0.1 + 0.2, 0.3]
    assert stats.t_interval(same[:3])[1:] == (None, None, None)
    assert interleaved.ewc_interval(same)[1:4] == (None, None, None)
    # A spread of a millionth is a spread (the rule is relative: 1e-9 of the mean).
    assert stats.t_interval([1.0, 1.000001, 1.0])[1] is not None
    assert interleaved.ewc_interval([1.0, 1.000001] * 5)[1] is not None


# --- report/stats.py ---


def test_t_interval_worked_example():
    """[1, 2, 4, 5]: mean 3, s^2 = (4+1+1+4)/3, se = sqrt(10/12) = 0.9128709;
    3 -+ 3.1824463 * 0.9128709 (scipy's ttest_1samp: the same)."""
    m, lo, hi, p = stats.t_interval([1, 2, 4, 5])
    assert m == 3 and lo == pytest.approx(0.0948373, abs=1e-7) and hi == pytest.approx(5.9051627, abs=1e-7)
    assert p == pytest.approx(0.0462051, abs=1e-7)
    assert stats.t_interval([4.0]) == (4.0, None, None, None)


def test_diff_stats_pairs_round_by_round_and_takes_away_the_other_pair():
    """diff_stats round by round: a - b; with less=(c, d), (a - b) - (c - d)
    (the bridge's difference in differences over rounds). Round 4 lacks d:
    left out, counted."""
    a, b = {1: 10, 2: 12, 3: 11, 4: 9}, {1: 8, 2: 9, 3: 9, 4: 7}
    c, d = {1: 5, 2: 5, 3: 6, 4: 5}, {1: 4, 2: 5, 3: 4}
    plain = stats.diff_stats(a, b, scale=2)
    assert plain["per_round"] == {"1": 4, "2": 6, "3": 4, "4": 4} and plain["mean"] == 4.5
    assert (plain["a_mean"], plain["b_mean"]) == (21, 16.5) and plain["relative"] == pytest.approx(4.5 / 21)
    dd = stats.diff_stats(a, b, less=(c, d))
    # (2 - 1), (3 - 0), (2 - 2)
    assert dd["per_round"] == {"1": 1, "2": 3, "3": 0} and dd["mean"] == pytest.approx(4 / 3)
    assert (dd["rounds"], dd["dropped"]) == (3, 1)


def test_ratio_stats_is_a_geometric_mean_with_its_interval_on_logs():
    """Ratios 2, 8 (round 3 has no base: left out): geometric mean 4; the
    t-interval of log 2, log 8 (mean log 4; s = (log 8 - log 2) / sqrt 2,
    se = s / sqrt 2 = log 2) taken back by exp."""
    r = stats.ratio_stats({1: 4.0, 2: 8.0, 3: 5.0}, {1: 2.0, 2: 1.0})
    half = 12.7062047 * math.log(2)
    assert r["mean"] == pytest.approx(4) and r["rounds"] == 2 and r["dropped"] == 1
    assert r["lo"] == pytest.approx(4 * math.exp(-half), rel=1e-7) and r["hi"] == pytest.approx(4 * math.exp(half), rel=1e-7)


def p(value):
    return {"p": value, "rounds": 5, "lo": 0.0, "hi": 1.0, "mean": 0.5}


def test_holm_worked_example():
    """p 0.01, 0.04, 0.03, 0.005 of 4: sorted 0.005, 0.01, 0.03, 0.04 times
    4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, each at least the one before: 0.02,
    0.03, 0.06, 0.06 (statsmodels' holm: the same). None and a p of None are skipped."""
    items = [p(0.01), p(0.04), None, p(0.03), p(0.005), {"p": None}]
    assert stats.holm(items) is items
    assert [d["p_holm"] for d in items if d and d.get("p")] == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert "p_holm" not in items[5]
    one = [p(0.6)]
    stats.holm(one)
    assert one[0]["p_holm"] == 0.6  # one comparison: its own p
    capped = [p(0.4), p(0.5)]
    stats.holm(capped)
    assert [d["p_holm"] for d in capped] == [0.8, 0.8]
    stats.holm(big := [p(0.6), p(0.7)])
    assert [d["p_holm"] for d in big] == [1.0, 1.0]  # at most 1


def test_benjamini_hochberg_worked_example_counts_each_comparison_once():
    """p 0.01, 0.04, 0.03, 0.005 of 4: sorted 0.005, 0.01, 0.03, 0.04 times
    4/1, 4/2, 4/3, 4/4 = 0.02, 0.02, 0.04, 0.04, each at most the one after:
    the same (statsmodels' fdr_bh: the same). The same comparison reached
    twice (a ratio the report shows in two places) is one of the family: 4,
    not 5 (with 5: 0.025, 0.05, 0.05, ...)."""
    a, b, c, d = p(0.01), p(0.04), p(0.03), p(0.005)
    stats.fdr([a, b, None, c, d, a, {"p": None}])
    assert [x["p_fdr"] for x in (a, b, c, d)] == pytest.approx([0.02, 0.04, 0.04, 0.02], abs=1e-15)
    assert {x["fdr_family"] for x in (a, b, c, d)} == {4}


def test_significant_needs_every_correction_below_alpha():
    d = {**p(0.01), "p_holm": 0.03, "p_fdr": 0.049}
    assert stats.significant(d)
    assert not stats.significant({**d, "p_fdr": 0.05})  # at ALPHA: not below it
    assert not stats.significant({**d, "p_holm": 0.051})
    # A correction that took p to exactly ALPHA took the difference back; which one is named.
    assert stats.lost_to({**d, "p_holm": 0.05}) == "holm" and stats.lost_to({**d, "p_fdr": 0.05}) == "fdr"
    assert stats.lost_to(d) is None and stats.lost_to({**d, "p": 0.05, "p_holm": 0.1}) is None
    assert not stats.significant({**d, "lo": None})  # no interval: nothing to say
    assert not stats.significant({**d, "rounds": 1})


def test_the_resolution_rule_is_strict_and_either_sign():
    """A difference must exceed its counter's resolution: equal to it is one
    step of the counter, not a measurement."""
    d = {"rounds": 4, "lo": 1.0, "hi": 3.0, "p": 0.01, "mean": 2.0}
    assert stats.measurable({**d, "resolution": None}) and stats.measurable({**d, "resolution": 1.999})
    assert not stats.measurable({**d, "resolution": 2.0})
    assert stats.measurable({**d, "mean": -2.0, "lo": -3.0, "hi": -1.0, "resolution": 1.999})
    assert not stats.measurable({**d, "mean": -2.0, "lo": -3.0, "hi": -1.0, "resolution": 2.0})
    assert not stats.measurable({**d, "p": 0.05}) and not stats.measurable(None)


def test_one_counter_step_apart_is_below_resolution_and_more_is_not():
    """Two means exactly one step of their counter apart (0.25, exact in
    binary: 1.25 against 1.0, either way round) are one tick of quantisation:
    marked with the coarsest phase's step (0.25 over 0.125). A sixteenth more
    (1.3125) is more than a step: not marked."""
    phases = [{"resolution": {"x": 0.125}}, {"resolution": {"x": 0.25}}, {"resolution": {}}]
    assert stats.below_resolution({}, 1.25, 1.0, phases, "x") == {"below_resolution": 0.25}
    assert stats.below_resolution({}, 1.0, 1.25, phases, "x") == {"below_resolution": 0.25}
    assert stats.below_resolution({}, 1.3125, 1.0, phases, "x") == {}
    assert stats.below_resolution({}, 1.25, 1.0, [{"resolution": {}}], "x") == {}  # no counter step: nothing to mark


def test_steins_second_stage_worked_example():
    """Rounds 1, 3 (first stage), 2, 6: mean over all 3; the first stage's
    s0 = sqrt(((1-2)^2 + (3-2)^2) / 1) = sqrt 2, se = s0 / sqrt 4, df 1:
    3 -+ 12.7062047 * 0.7071068."""
    d = stats.diff_stats({1: 1.0, 2: 3.0, 3: 2.0, 4: 6.0}, {r: 0.0 for r in (1, 2, 3, 4)})
    stats.stein(d, 2)
    assert d["mean"] == 3 and d["first_stage"] == 2 and d["method"].endswith("(the spread of the first 2 rounds)")
    assert d["lo"] == pytest.approx(-5.9846435, abs=1e-7) and d["hi"] == pytest.approx(11.9846435, abs=1e-7)
    assert d["p"] == pytest.approx(0.1473631, abs=1e-7)  # 2 P(T1 > 3 / 0.7071068)


def test_steins_second_stage_on_the_log_scale():
    """A ratio (max mode): the same on the logs. Ratios 2, 8 (first stage),
    4, 4: log mean log 4, s0 = (log 8 - log 2) / sqrt 2 = sqrt 2 log 2, se = s0 / 2."""
    r = stats.ratio_stats({1: 2.0, 2: 8.0, 3: 4.0, 4: 4.0}, {r: 1.0 for r in (1, 2, 3, 4)})
    stats.stein(r, 2)
    half = 12.7062047 * math.sqrt(2) * math.log(2) / 2
    assert r["lo"] == pytest.approx(4 * math.exp(-half), rel=1e-7) and r["hi"] == pytest.approx(4 * math.exp(half), rel=1e-7)
    # Unchanged: no first stage, a first stage of one round, or one without spread.
    for first, rounds in ((None, {1: 2.0, 2: 8.0}), (1, {1: 2.0, 2: 8.0}), (2, {1: 2.0, 2: 2.0, 3: 4.0})):
        d = stats.ratio_stats(rounds, {r: 1.0 for r in rounds})
        before = dict(d)
        assert stats.stein(d, first) == before


# --- the per-block pairing (interleaved.py) and the terms (breakdown.py) ---


def test_a_block_of_exactly_min_block_requests_successes_has_a_median():
    """MIN_BLOCK_REQUESTS (5) successful requests give a block its median;
    4 do not, however many were sent (openloop counts failures, times only successes)."""
    assert interleaved.MIN_BLOCK_REQUESTS == 5
    phase = {"by_path": {"a": {"blocks": [
        {"requests": 5, "p50": 1.0}, {"requests": 4, "p50": 2.0},
        {"requests": 7, "failed": 2, "p50": 3.0}, {"requests": 7, "failed": 3, "p50": 4.0},
        {"requests": 9, "failed": None, "p50": 5.0}]}}}
    assert interleaved.blocks(phase) == {"a": [1.0, None, 3.0, None, 5.0]}
    phase["duration_s"] = 5
    phase["by_path"]["a"].update({"requests": 32, "failed_rate": 0.15})
    assert interleaved.summary(phase)["a"]["blocks"] == 3


def test_the_measured_stream_is_round_1_not_the_warm_up():
    """plan.py runs a warm-up stream (round 0) before the measured one: the report takes the measured one."""
    load = {"phases": [
        {"name": "ping__mix__r0", "workload": "ping", "path": "mix", "round": 0},
        {"name": "cpu__mix__r1", "workload": "cpu", "path": "mix", "round": 1},
        {"name": "ping__tcp__r1", "workload": "ping", "path": "tcp", "round": 1},
        {"name": "ping__mix__r1", "workload": "ping", "path": "mix", "round": 1}]}
    assert interleaved.mixed_phase(load, "ping")["name"] == "ping__mix__r1"
    assert interleaved.mixed_phase({"phases": load["phases"][:1]}, "ping") is None


# Per block (10 blocks, µs): tcp - tcp-lo (A), uds - uds-lo (B), tcp - tcp-ka
# (C), over a swing every path shares (S, ms).
S = [1.0, 1.3, 0.9, 1.1, 1.2, 1.0, 0.8, 1.4, 1.0, 1.1]
A = [110, 90, 100, 120, 80, 100, 105, 95, 100, 100]
B = [10, 30, 20, 0, 40, 20, 15, 25, 20, 20]
C = [50, 70, 60, 40, 80, 60, 55, 65, 60, 60]


def stream_blocks():
    """{path: [p50 ms per block]}: tcp-lo at 0.5 ms over the swing, uds-lo at
    0.4, tcp A µs above tcp-lo, uds B above uds-lo, tcp-ka C below tcp; the
    other pooled paths 30 µs below their new-connection twins."""
    v = {"tcp-lo": [s + 0.5 for s in S], "uds-lo": [s + 0.4 for s in S]}
    v["tcp"] = [x + a / 1e3 for x, a in zip(v["tcp-lo"], A)]
    v["uds"] = [x + b / 1e3 for x, b in zip(v["uds-lo"], B)]
    v["tcp-ka"] = [x - c / 1e3 for x, c in zip(v["tcp"], C)]
    for path in ("tcp-lo", "uds", "uds-lo"):
        v[f"{path}-ka"] = [x - 0.03 for x in v[path]]
    return v


def mixed(values):
    return {"block_s": 1, "by_path": {p: {"blocks": [{"requests": 20, "p50": x} for x in xs]} for p, xs in values.items()}}


def test_the_bridge_and_setup_terms_per_block():
    """Through breakdown(), as the report computes them: each term's
    per-block values are its paths' differences at the same instant (µs)."""
    terms = breakdown.breakdown([], "ping", [("client_p50_ms", "client p50 latency", 1e3, "µs")],
                                mixed=mixed(stream_blocks()))

    def per_block(key):
        d = terms[key]["figures"]["client_p50_ms"]
        return [d["per_round"][str(i + 1)] for i in range(d["blocks"])], d["mean"]

    # The bridge: (tcp - tcp-lo) - (uds - uds-lo) = A - B, mean 800 / 10.
    got, mean = per_block("bridge_new")
    assert got == pytest.approx([100, 60, 80, 120, 40, 80, 90, 70, 80, 80], abs=1e-9) and mean == pytest.approx(80)
    # Connection setup across the bridge: tcp - tcp-ka = C, mean 600 / 10.
    got, mean = per_block("tcp_connect")
    assert got == pytest.approx(C, abs=1e-9) and mean == pytest.approx(60)
    assert per_block("uds_connect")[0] == pytest.approx([30] * 10, abs=1e-9)
    # The answer's pair: tcp-lo - uds-lo = 100 µs in every block.
    assert per_block("socket_new")[0] == pytest.approx([100] * 10, abs=1e-9)
    # The bridge pooled: (tcp-ka - tcp-lo-ka) - (uds-ka - uds-lo-ka) = (A - C + 30) - B.
    got, _ = per_block("bridge_pooled")
    assert got == pytest.approx([a - c + 30 - b for a, b, c in zip(A, B, C)], abs=1e-9)


def test_a_block_some_path_lacks_is_left_out_of_that_term_only():
    """11 blocks, uds without a median in the 4th: the bridge pairs 10 (A - B
    less the 4th's 120, plus an 11th like the 1st: (800 - 120 + 100) / 10);
    tcp against tcp-lo all 11; with 9 blocks left, no interval at all."""
    v = {path: xs + xs[:1] for path, xs in stream_blocks().items()}
    v["uds"][3] = None
    d = interleaved.block_diff(v, "tcp", "tcp-lo", ["uds", "uds-lo"])
    assert d["blocks"] == 10 and d["dropped"] == 1 and d["mean"] == pytest.approx(78)
    assert interleaved.block_diff(v, "tcp", "tcp-lo")["blocks"] == 11
    v["uds"][4] = None
    assert interleaved.block_diff(v, "tcp", "tcp-lo", ["uds", "uds-lo"]) is None


# --- report/precision.py: the half-widths PRECISION judges ---


def precision_load(mode, a, b):
    """A load.json of tcp-lo (a: its figure by round) and uds-lo (b)."""
    def phase(path, r, v):
        figures = {"requests": v, "duration_s": 1} if mode == "max" else {"requests": 100, "duration_s": 5,
                                                                         "duration_ms": {"p50": v}}
        return {"workload": "ping", "path": path, "round": r, **figures}
    return {"settings": {"mode": mode}, "phases": [phase("tcp-lo", r, v) for r, v in a.items()]
            + [phase("uds-lo", r, v) for r, v in b.items()] + [phase("tcp-lo", 0, 9.0)]}


def test_precision_half_width_worked_example():
    """A fixed rate: tcp-lo minus uds-lo by round 0.1, 0.3 (first stage) and
    0.2; Stein: s0 = sqrt(0.02), se = s0 / sqrt 3, half-width 12.7062047 se,
    as a share of tcp-lo's mean 1.1 (the warm-up, round 0, is no round)."""
    from report.precision import comparisons, needed
    (c,) = comparisons(precision_load("rate", {1: 1.0, 2: 1.2, 3: 1.1}, {1: 0.9, 2: 0.9, 3: 0.9}), first=2)
    assert (c["term"], c["pair"], c["rounds"]) == ("socket_new", "uds-lo against tcp-lo", 3)
    assert c["half_width"] == pytest.approx(12.7062047 * math.sqrt(0.02 / 3) / 1.1, rel=1e-7)
    # To reach a tenth of it: 100 times the rounds.
    assert needed([{**c, "half_width": 0.5}], 0.05) == 300


def test_precision_half_width_of_a_ratio_worked_example():
    """Flat out: uds-lo's requests/s over tcp-lo's, 2 and 8 (first stage) and
    4: the log-scale half-width, taken back as a share: exp(12.7062047 *
    sqrt(2) log 2 / sqrt 3) - 1."""
    from report.precision import comparisons
    (c,) = comparisons(precision_load("max", {1: 100, 2: 100, 3: 100}, {1: 200, 2: 800, 3: 400}), first=2)
    assert c["half_width"] == pytest.approx(math.exp(12.7062047 * math.sqrt(2) * math.log(2) / math.sqrt(3)) - 1,
                                            rel=1e-6)


# --- report/breakdown.py: the answer's verdict at its edges ---


def rounds_diff(mean, lo, hi, a_mean=32.0):
    """A difference over 10 rounds, not measurable by its own p, TCP's median a_mean µs."""
    return {"mean": mean, "lo": lo, "hi": hi, "rounds": 10, "a_mean": a_mean, "p": 0.5, "resolution": None}


def test_the_same_verdict_needs_the_interval_strictly_inside_the_margin():
    """MARGIN 25% of TCP's 32 µs: ±8 µs (exact in binary). One comparison (k
    1): the interval is its own, half-width 6 for -4 to 8. Ending at 8 is on
    the margin, not inside it: not sure; a quarter in from either edge: the
    same; a quarter out: not sure."""
    assert verdicts.half_width(rounds_diff(2.0, -4.0, 8.0), k=1) == 6.0  # t x (6 / t): exact at these numbers
    verdict = lambda mean, lo, hi: verdicts.three_way(rounds_diff(mean, lo, hi), 25, 1)["verdict"]  # noqa: E731
    assert verdicts.three_way(rounds_diff(2.0, -4.0, 8.0), 25, 1)["margin"] == 8.0
    assert (verdict(2.0, -4.0, 8.0), verdict(-2.0, -8.0, 4.0)) == ("unsure", "unsure")  # on the edge
    assert (verdict(2.0, -3.75, 7.75), verdict(-2.0, -7.75, 3.75)) == ("same", "same")  # just inside
    assert (verdict(2.0, -4.25, 8.25), verdict(-2.0, -8.25, 4.25)) == ("unsure", "unsure")  # just outside


ANSWER_PAIR = {"key": "socket_new", "paths": ["tcp-lo", "uds-lo"], "answer": "new", "against": "TCP over loopback"}


def test_not_sure_yet_names_the_extra_seconds_not_the_streams_length():
    """A stream of 30 blocks of 2 s (nu 3), mean 2.4 µs, its interval 2.4 -+
    t(0.975, 3) (se 1), TCP's median 100 µs (margin ±2 µs): the blocks named
    (to_decide) are blocks of 2 s, so the stream is twice as many seconds,
    60 of them already run."""
    t3 = 3.1824463
    d = {"mean": 2.4, "lo": 2.4 - t3, "hi": 2.4 + t3, "rounds": 30, "blocks": 30, "block_s": 2, "a_mean": 100.0,
         "p": 0.5, "resolution": None}
    n = verdicts.to_decide(d, 2.0, 1)
    row = words.answer_row(ANSWER_PAIR, {"figures": {"client_p50_ms": d}}, 1, 2, None, {})
    assert row["verdict"] == "unsure" and n > 30
    said = (f"a stream of {2 * n:,} s (INTERLEAVE={2 * n}, {2 * n - 60:,} s more) would decide 8 times in 10 if the "
            "true difference is the one measured")
    assert row["words"] == f"not sure yet: {said}"
    assert row["phrase"].endswith(f"not sure yet; {said}")


def measured_diff(mean, a_mean=64.0):
    """A difference over 10 rounds, half-width 6 (exact: see above), its own
    p 0.01 (measurable, one comparison), TCP's median a_mean µs."""
    return {"mean": mean, "lo": mean - 6.0, "hi": mean + 6.0, "rounds": 10, "a_mean": a_mean, "p": 0.01,
            "resolution": None, "relative": mean / a_mean}


def test_a_difference_inside_the_margin_is_said_as_both():
    """MARGIN 25% of TCP's 64 µs: ±16 µs. Each interval excludes 0 (faster or
    slower). 9.75 -+ 6 is 3.75 to 15.75: inside the margin too, so both are
    said; 10 -+ 6 ends on the margin (not inside) and 10.25 -+ 6 crosses it:
    "faster by" alone. Either sign alike."""
    def verdict(mean):
        v = verdicts.three_way(measured_diff(mean), 25, 1)
        return v["verdict"], v["inside_margin"]
    assert (verdict(9.75), verdict(-9.75)) == (("differs", True), ("differs", True))  # just inside
    assert (verdict(10.0), verdict(-10.0)) == (("differs", False), ("differs", False))  # on the edge
    assert (verdict(10.25), verdict(-10.25)) == (("differs", False), ("differs", False))  # crossing
    row = lambda mean: words.answer_row(  # noqa: E731
        ANSWER_PAIR, {"figures": {"client_p50_ms": measured_diff(mean)}}, 1, 25, None, {})
    inside, crossing, slower = row(9.75), row(10.25), row(-9.75)
    assert (inside["verdict"], inside["inside_margin"]) == ("differs", True)
    assert inside["words"] == "faster by 10 µs (15%): inside the ±25% that counts"
    assert inside["phrase"].endswith("(`uds-lo` against `tcp-lo`: 95% CI 4 to 16 µs, 10 rounds), inside the ±25% "
                                     "(16 µs) that counts: no difference larger than that")
    assert slower["words"] == "slower by 10 µs (15%): inside the ±25% that counts"
    assert (crossing["words"], crossing["inside_margin"]) == ("faster by 10 µs (16%)", False)
    assert crossing["phrase"].endswith("10 rounds)")
    # The answer chart's colour says both too: a paler blue or red than a difference past the margin.
    from report.charts import VERDICT_COLOURS, verdict_kind
    assert [verdict_kind(r) for r in (inside, slower, crossing)] == ["faster inside", "slower inside", "faster"]
    assert len({VERDICT_COLOURS[verdict_kind(r)] for r in (inside, slower, crossing)}) == 3
