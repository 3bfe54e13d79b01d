"""The answer holds only for paths that served: a pair with a path that failed
more than 1% of its measured requests gets no verdict, said first with the
path's statuses and the likely cause; a stream alone (ROUNDS=0) is reported."""
import json
import re

import numpy as np

from report import cli, markdown
from report.breakdown import failures
from report.test_report import build, make_k6

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


SAVED = re.compile(r"the socket saved (5[5-9]|6[0-5]) µs \(13% of tcp-lo(-ka)?'s median\)")


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
    assert len(SAVED.findall(markdown.render_markdown(rep))) >= 2


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
