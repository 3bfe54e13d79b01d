"""The answer holds only for paths that served: a pair with a path that failed
more than 1% of its measured requests gets no verdict, said first with the
path's statuses and the likely cause; a stream alone (ROUNDS=0) is reported."""
import json
import math
import re

import numpy as np
import pytest
import scipy.fft as sfft
from scipy import stats as sps

from report import cli, context, interleaved, markdown, stats, verdicts
from report.breakdown import failures
from report.testkit import COMPOSE, build, fake_query, make_k6, server_table

PAIR = ("tcp-lo", "uds-lo", "tcp-lo-ka", "uds-lo-ka")


def stream(seconds=30, fail=None, statuses=None, slower=0.06, seed=1):
    """by_path of a stream of PAIR: the socket `slower` ms faster than TCP
    over loopback, each second's median with noise; fail: {path: share}
    failed (statuses: that path's), its medians from the rest."""
    rng = np.random.default_rng(seed)
    fail, out = fail or {}, {}
    for p in PAIR:
        base = 0.40 + (slower if p.startswith("tcp") else 0.0)
        share = fail.get(p, 0.0)
        blocks = []
        for _ in range(seconds):
            failed = round(50 * share)
            blocks.append({"requests": 50, "failed": failed,
                           "p50": None if failed >= 46 else float(base + 0.01 * rng.standard_normal())})
        out[p] = {"requests": 50 * seconds, "failed_rate": share, "duration_ms": {"p50": base, "p99": 3 * base},
                  "statuses": {"502": round(50 * seconds * share), "503": 0, "504": 0, "0": 0}
                  if share and statuses is None else (statuses or {}), "blocks": blocks}
    return out


def run(rounds=2, **kw):
    by_path = stream(**kw)
    return make_k6(paths=PAIR, rounds=rounds, rate=200, duration=5, interleave=30, block=1,
                   client=lambda p, r: ({"by_path": by_path if r else {}, "failed_rate": 0} if p == "mix" else {}))


SAVED = re.compile(r"the socket saved (5[5-9]|6[0-5]) µs \(1[23]% of tcp-lo(-ka)?'s median\)")


def test_a_healthy_pair_gets_its_verdict():
    text = build(run())["workloads"]["ping"]["answer"]
    assert len(SAVED.findall(text)) == 2 and "no verdict" not in text


def test_a_path_failing_part_of_its_requests_wins_nothing():
    """A socket nginx cannot always reach: its few successes are fast, and
    timing them alone would call it a saving."""
    k6 = run(fail={"uds-lo": 0.3})
    text = build(k6)["workloads"]["ping"]["answer"]
    first = text.split(". ")[0]  # said first
    assert first.startswith("**`ping`** (`/ping`), at 200 req/s, client median: **no verdict**")
    assert "no verdict** against TCP over loopback (`uds-lo` against `tcp-lo`)" in first
    assert "`uds-lo` failed 30% of its requests (502: 450)" in first
    assert "its mode or group keeps nginx out (make contract)" in first
    assert "saved" not in first and "`uds-lo` against `tcp-lo`:" not in text
    # The pooled pair, whose paths served, keeps its verdict.
    assert SAVED.search(text.split(". ", 1)[1]) and "`uds-lo-ka` against `tcp-lo-ka`: 95% CI" in text


def test_a_path_that_failed_every_request_is_named_not_left_out():
    k6 = run(fail={"tcp-lo": 1.0}, statuses={"0": 1500, "refused": 1500})
    text = build(k6)["workloads"]["ping"]["answer"]
    assert "`tcp-lo` failed 100% of its requests (0: 1,500, refused: 1,500)" in text
    assert "no response reached the generator" in text


def test_one_failure_in_a_hundred_is_within_the_threshold():
    k6 = run(fail={"uds-lo": 0.01})
    text = build(k6)["workloads"]["ping"]["answer"]
    assert "no verdict" not in text and len(SAVED.findall(text)) == 2


def test_failures_are_the_streams_else_the_rounds():
    k6 = run(fail={"uds-lo": 0.3})
    assert failures(k6, "ping")["uds-lo"] == {"requests": 1500, "failed": 450, "statuses": {"502": 450, "503": 0, "504": 0, "0": 0}}
    rounds = make_k6(paths=("tcp", "uds"), rounds=2, client=lambda p, r: {"failed_rate": 0.5, "statuses": {"504": 500}}
                     if p == "uds" else {})
    assert failures(rounds, "ping")["uds"] == {"requests": 2000, "failed": 1000, "statuses": {"504": 1000}}


def test_a_stream_alone_is_reported():
    """ROUNDS=0: make load's interleaved stream and nothing else (the A/A runs
    of docs/results.md): the answer, and no figure of one path at a time."""
    k6 = run(rounds=0)
    rep = build(k6)
    assert rep["phases"] == [] and len(SAVED.findall(rep["workloads"]["ping"]["answer"])) == 2
    # The report opens with the answer as a table: a row per pair, each faster.
    md = markdown.render_markdown(rep)
    rows = [line for line in md[md.index("## The answer"):md.index("## Machine")].splitlines()
            if re.match(r"\| (new per request|pooled)", line)]
    assert len(rows) == 2 and all(re.search(r"\*\*faster by (5[5-9]|6[0-5]) µs \(1[23]%\)\*\*", r) for r in rows), rows


def test_make_report_reads_a_stream_alone(tmp_path):
    """docs/results.md's A/A runs (make load ROUNDS=0) were refused at load
    time ("settings/rounds: 0 is less than the minimum of 1")."""
    path = tmp_path / "load.json"
    path.write_text(json.dumps(run(rounds=0)))
    assert cli.read_load(path)["settings"]["rounds"] == 0


def test_a_stream_alone_says_it_has_no_costs():
    md = markdown.render_markdown(build(run(rounds=0)))
    assert "No rounds of one path at a time (ROUNDS=0): no costs per request" in md
    assert "Means over the measured rounds" not in md and "tcp was not measured" not in md


# --- the interval over the stream's blocks (interleaved.ewc_interval) and the three-way verdict ---

def test_ewc_degrees_of_freedom_and_interval_against_scipys_dct():
    """EWC's cosine transforms are the orthonormal DCT-II's coefficients 1..nu
    (scipy.fft.dct, an independent implementation); nu = floor(0.4 n^(2/3))."""
    assert [interleaved.dof(n) for n in (10, 11, 12, 20, 30, 60, 120)] == [1, 1, 2, 2, 3, 6, 9]
    xs = [3.0, 5.0, 4.0, 8.0, 6.0, 7.0, 2.0, 9.0, 5.0, 6.0, 4.0, 7.0, 8.0, 3.0, 6.0, 5.0, 7.0, 4.0, 6.0, 5.0]
    n, nu = len(xs), 2
    lam = sfft.dct(np.array(xs), type=2, norm="ortho")[1:nu + 1]
    se = math.sqrt(float(np.mean(lam ** 2)) / n)
    m, q = float(np.mean(xs)), sps.t.ppf(0.975, nu)
    got = interleaved.ewc_interval(xs)
    assert got[0] == pytest.approx(m) and got[4] == nu
    assert got[1] == pytest.approx(m - q * se, rel=1e-12) and got[2] == pytest.approx(m + q * se, rel=1e-12)
    assert got[3] == pytest.approx(2 * sps.t.sf(m / se, nu), rel=1e-9)
    assert interleaved.ewc_interval(xs[:9]) is None  # under MIN_BLOCKS
    assert interleaved.ewc_interval([2.0] * 12)[1:4] == (None, None, None)  # no spread, no interval


def diff(mean, lo, hi, n=10, a_mean=400.0, **kw):
    """A difference of rounds as report/stats.py gives it, significant or not by its own interval."""
    sig = lo > 0 or hi < 0
    return {"mean": mean, "lo": lo, "hi": hi, "rounds": n, "a_mean": a_mean, "p": 0.01 if sig else 0.5,
            "resolution": None, **kw}


def test_the_three_way_verdict_worked_examples():
    # Measurable: the socket differs.
    assert verdicts.three_way(diff(20, 10, 30), 2, 1)["verdict"] == "differs"
    # Inside ±2% of 400 µs (±8) even widened for 4 comparisons: half-width 2 x t(1-0.05/8, 9) / t(0.975, 9)
    # = 2 x 3.1109 / 2.2622 = 2.7504.
    v = verdicts.three_way(diff(1, -1, 3), 2, 4)
    assert v["verdict"] == "same" and v["margin"] == pytest.approx(8)
    assert v["widened"] == pytest.approx((1 - 2.7504, 1 + 2.7504), abs=1e-4)
    # Inside the margin alone, not once widened (half-width 6.5: -5.5 to 7.5 alone, 1 + 8.94 widened): not sure yet.
    assert verdicts.three_way(diff(1, -5.5, 7.5), 2, 1)["verdict"] == "same"
    assert verdicts.three_way(diff(1, -5.5, 7.5), 2, 4)["verdict"] == "unsure"
    # Neither: mean 6, half-width 8 at 10 rounds, margin ±8: the rounds named are the fewest at which a new
    # run would decide with chance POWER if the truth were 6 (chance_to_decide: report/test_calibration_projection.py).
    v = verdicts.three_way(diff(6, -2, 14), 2, 1)
    chance = lambda n: verdicts.chance_to_decide(diff(6, -2, 14), n, 8, 1)  # noqa: E731
    assert v["verdict"] == "unsure" and chance(v["to_decide"]) >= 0.8 > chance(v["to_decide"] - 1)
    # Lost to Holm: its own interval excludes 0, not once the comparisons are judged together.
    assert verdicts.three_way(diff(20, 10, 30, p_holm=0.2), 2, 4)["verdict"] == "unsure"


def test_more_seconds_of_a_stream_follow_its_degrees_of_freedom():
    """A stream's difference over 30 blocks (nu 3): the chance that a longer
    stream decides grows with its length (and its nu), and the length named
    is the fewest blocks with chance POWER."""
    d = diff(6, -10, 22, n=30, blocks=30, block_s=1)
    more = verdicts.to_decide(d, 8, 1)
    chances = [verdicts.chance_to_decide(d, n, 8, 1) for n in (31, 60, 120, more - 1, more)]
    assert chances[:3] == sorted(chances[:3]) and chances[3] < verdicts.POWER <= chances[4]


@pytest.mark.parametrize("value", ["abc", "0", "100", "-2", ""])
def test_a_bad_margin_is_refused_by_name(value, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MARGIN", value)
    assert cli.main(["--run", "r1", "--results", str(tmp_path)]) == 2
    assert f'report: MARGIN="{value}": the answer\'s margin, a percentage of TCP\'s median' in capsys.readouterr().err


def test_the_margin_reaches_the_answer():
    """MARGIN=20: the same comparison inside ±20% (90 µs) reads no difference."""
    k6 = run(slower=0.005)
    assert "not told apart" in build(k6)["workloads"]["ping"]["answer"] or \
        "no difference larger than ±2%" in build(k6)["workloads"]["ping"]["answer"]
    rep = context.build_report(k6, COMPOSE, fake_query(server_table(k6)), "http://prom:9090", margin_pct=20)
    assert rep["margin_pct"] == 20 and "no difference larger than ±20%" in rep["workloads"]["ping"]["answer"]


def two_streams(seconds=30, seed=2):
    """A run with a stream per connection handling (plan.py's streams): the
    pooled pair's first, then the new-connection pair's."""
    by_path = stream(seconds=seconds, seed=seed)
    k6 = make_k6(paths=PAIR, rounds=0, rate=200, duration=5, interleave=seconds, block=1, split=True)
    measured = [p for p in k6["phases"] if p["round"] == 1]
    assert [p["name"] for p in measured] == ["ping__mix-pooled__r1", "ping__mix-new__r1"]
    for p in measured:
        p["by_path"] = {q: by_path[q] for q in p["paths"]}
    return k6


def test_each_answer_pair_is_judged_in_its_own_stream_and_a_term_across_them_says_so():
    rep = build(two_streams())
    wl = rep["workloads"]["ping"]
    assert len(SAVED.findall(wl["answer"])) == 2
    terms = wl["breakdown"]
    assert not terms["socket_new"]["figures"]["client_p50_ms"].get("across_streams")
    assert not terms["socket_pooled"]["figures"]["client_p50_ms"].get("across_streams")
    assert terms["tcp_lo_connect"]["figures"]["client_p50_ms"]["across_streams"] is True
    assert [s["paths"] for s in wl["interleaved"]["streams"]] == [["tcp-lo-ka", "uds-lo-ka"], ["tcp-lo", "uds-lo"]]
    assert wl["interleaved"]["duration_s"] == 60 and set(wl["interleaved"]["paths"]) == set(PAIR)
    # Each path's requests/s over its own stream (30 s), not over both (the table read half the rate).
    for path, e in wl["interleaved"]["paths"].items():
        assert e["rps"] == pytest.approx(e["requests"] / 30), path
    md = markdown.render_markdown(rep)
    assert ("in one arrival stream per connection handling (a pooled comparison never shares its stream with requests "
            "that each open a connection): the pooled paths (tcp-lo-ka, uds-lo-ka) for 30 s; then the new paths "
            "(tcp-lo, uds-lo) for 30 s") in md
    assert "| tcp-lo − tcp-lo-ka † |" in md and "† Its client p50 pairs second b of the pooled paths' stream" in md


def test_a_block_median_that_is_not_a_number_is_refused_where_it_stands(tmp_path):
    """One NaN block median crashed the report (ValueError in stats.fdr)."""
    k6 = run()
    text = json.dumps(k6).replace('"p50": ' + json.dumps(k6["phases"][1]["by_path"]["uds-lo"]["blocks"][3]["p50"]),
                                  '"p50": NaN', 1)
    path = tmp_path / "load.json"
    path.write_text(text)
    with pytest.raises(cli.ReportError) as e:
        cli.read_load(path)
    assert "at phases/1/by_path/uds-lo/blocks/3/p50: 'NaN (not a number JSON allows)' is not of type" in str(e.value)


def test_a_pair_short_of_blocks_is_named_with_its_reason():
    """Too few requests a block (3, under the 5 a median needs): the answer
    named the wrong reason ("PATHS needs a pair") or dropped the pair."""
    k6 = run()
    for p in k6["phases"]:
        for v in (p.get("by_path") or {}).values():
            for b in v["blocks"]:
                b["requests"] = 3
    text = build(k6)["workloads"]["ping"]["answer"]
    assert "PATHS needs a pair" not in text
    assert ("was not judged against TCP over loopback (`uds-lo` against `tcp-lo`): fewer than 10 blocks in which "
            "both paths had a median (each from 5 or more successful requests)") in text


def test_the_answer_is_its_own_family_and_the_rest_another():
    """The answer's comparisons: Holm among themselves at 4% (p_holm scaled
    by 5/4 to be held to 5%); every other comparison of the report:
    Benjamini-Hochberg among themselves at 1% (p_fdr scaled by 5). Holm on
    0.01, 0.02, 0.3: 0.03, 0.04, 0.3, scaled 0.0375, 0.05, 0.375: the first
    alone is called. BH on 0.002, 0.004, 0.5: 0.006, 0.006, 0.5, scaled
    0.03, 0.03, 1.0 (capped): the first two."""
    ps = [{"p": 0.01}, {"p": 0.02}, {"p": 0.3}]
    stats.holm(ps, stats.ANSWER_ALPHA)
    assert [d["p_holm"] for d in ps] == pytest.approx([0.0375, 0.05, 0.375], abs=1e-12)
    qs = [{"p": 0.002}, {"p": 0.004}, {"p": 0.5}]
    stats.fdr(qs, stats.EXPLORE_ALPHA)
    assert [d["p_fdr"] for d in qs] == pytest.approx([0.03, 0.03, 1.0], abs=1e-12)
    assert stats.ANSWER_ALPHA + stats.EXPLORE_ALPHA == pytest.approx(stats.ALPHA)
    # In a report: the answer's client medians are judged by Holm alone; the other terms and ratios by BH alone.
    wl = build(two_streams())["workloads"]["ping"]
    for key, t in wl["breakdown"].items():
        d = t["figures"]["client_p50_ms"]
        if key in ("socket_new", "socket_pooled"):
            assert "p_holm" in d and "p_fdr" not in d, key
        elif d is not None and d.get("p") is not None:
            assert "p_fdr" in d and "p_holm" not in d, key


def test_a_stream_run_charts_the_answer_the_stream_and_its_percentiles(tmp_path):
    """The charts of the answer: its comparisons with their intervals (under
    the answer table), each path's median second by second and its latency
    distribution (beside the stream's table); per round only the costs."""
    from report import charts
    rep = build(two_streams())
    rep["charts"] = charts.write_charts(rep, tmp_path)
    files = [c["file"] for c in rep["charts"]]
    assert files[:3] == ["ping-answer.png", "ping-stream.png", "ping-percentiles.png"]
    assert "ping-latency.png" not in files
    for f in files:
        assert (tmp_path / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    wl = rep["workloads"]["ping"]
    assert set(wl["interleaved"]["blocks"]) == set(PAIR) and len(wl["interleaved"]["blocks"]["uds-lo"]) == 30
    assert all(set(e["quantiles_ms"]) == {"p50", "p90", "p95", "p99", "p999"} for e in wl["interleaved"]["paths"].values())
    md = markdown.render_markdown(rep)
    answer, rest = md[:md.index("## Machine")], md[md.index("## Machine"):]
    assert "(ping-answer.png)" in answer and "(ping-stream.png)" in rest and "(ping-percentiles.png)" in rest
    assert md.index("(ping-stream.png)") < md.index("## Warnings")


def test_make_max_gives_no_ratio_for_a_path_that_failed_its_requests():
    """make max, a socket nginx cannot reach: its 502s come back fast, so it
    carries 4x TCP's requests/s. As make load, its pair gets no verdict, said
    first with the path's share, statuses and likely cause, and no ratio; the
    pooled pair, whose paths served, keeps its ratio."""
    rps = {"tcp": 8000, "uds": 32000, "tcp-ka": 25000, "uds-ka": 30000}
    swing = iter([1.0, 1.03, 0.98] * 20)

    def client(p, r):
        n = round(rps[p] * 10 * next(swing))
        return {"requests": n, **({"failed_rate": 0.4, "statuses": {"502": round(0.4 * n)}} if p == "uds" else {})}
    k6 = make_k6(client=client)
    k6["settings"].update({"mode": "max", "connections": 64})
    rep = build(k6)
    text = rep["workloads"]["ping"]["answer"]
    assert "**no verdict** against TCP across the Docker bridge (`uds` against `tcp`): `uds` failed 40% of its " \
           "requests (502: " in text
    assert "nginx could not connect to the app's socket" in text
    assert "uds carried" not in text and "uds against tcp" not in text
    assert re.search(r"uds-ka carried 1\.[12]\dx the requests/s of tcp-ka \(95% CI", text), text
    row = next(r for r in rep["workloads"]["ping"]["answer_parts"]["rows"] if r["pair"] == ["uds", "tcp"])
    assert (row["verdict"], row["words"], row["ratio"], row["lo"], row["hi"]) == (
        "none", "no verdict: uds failed 40%", None, None, None)
    answer = markdown.render_markdown(rep).split("## Machine")[0]
    assert "- **no verdict** against TCP across the Docker bridge (`uds` against `tcp`): `uds` failed 40%" in answer
    assert ("| new per request | TCP across the Docker bridge (`uds` vs `tcp`) | nginx | — | — | no verdict: uds "
            "failed 40% |") in answer


def test_the_margins_default_is_envs_in_every_way_in(tmp_path, monkeypatch, capsys):
    """MARGIN's default lives in .env (generated from settings.toml): cli.run()
    without a margin (it crashed in three_way), build_report() without one
    and make report with MARGIN unset all take .env's; another .env, another
    margin."""
    from dotenv import dotenv_values
    from report import lab
    want = float(dotenv_values(lab.ROOT / ".env")["MARGIN"])
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "load.json").write_text(json.dumps(run()))
    k6 = json.loads((tmp_path / "r1" / "load.json").read_text())
    rep = cli.run("r1", "http://127.0.0.1:1", tmp_path, query=fake_query(server_table(k6)))
    assert rep["margin_pct"] == want and rep["workloads"]["ping"]["answer_parts"]["margin_pct"] == want
    assert context.build_report(k6, COMPOSE, fake_query(server_table(k6)))["margin_pct"] == want
    env = tmp_path / "other.env"
    env.write_text("MARGIN=7\n")
    monkeypatch.setattr(lab, "ENV_FILE", env)
    monkeypatch.delenv("MARGIN", raising=False)
    assert cli.run("r1", "http://127.0.0.1:1", tmp_path, query=fake_query(server_table(k6)))["margin_pct"] == 7.0
    monkeypatch.setattr(lab, "ENV_FILE", tmp_path / "none.env")
    with pytest.raises(cli.ReportError) as e:
        cli.run("r1", "http://127.0.0.1:1", tmp_path, query=fake_query(server_table(k6)))
    assert "MARGIN is not set, and .env, which holds its default, is not here" in str(e.value)
