"""make compare's comparison (report/compare.py): verdicts at their boundaries,
the tables, and the command line."""
import json

import pytest

from report import compare


def rep(testid, p50_ms, cpu=None, not_pooled=None):
    """A report.json as report.cli writes it, reduced to what compare reads:
    p50_ms is {path: [median per round, ms]}; not_pooled: the report's
    {term: why} of pooled pairs whose paths did not pool."""
    phases = []
    for path, values in p50_ms.items():
        for r, v in enumerate(values):
            figures = {"client_p50_ms": v, "app_cpu_us_per_req": (cpu or {}).get(path, [None] * len(values))[r]}
            phases.append({"workload": "ping", "path": path, "round": r, "figures": figures})
    return {"testid": testid, "settings": {"rate": 200, "paths": list(p50_ms)}, "warnings": [], "phases": phases,
            "workloads": {"ping": {"not_pooled": not_pooled or {}}}}


def test_the_interleaved_streams_judgment_is_taken_from_the_report():
    """make load's answer pairs the paths second by second: compare takes the
    report's figure, not the four rounds of costs, even with no round at all."""
    go = rep("c-go", {"tcp-lo": [1.0, 1.1, 1.0], "uds-lo": [1.0, 1.0, 1.1]})
    blocks = {"mean": 39.0, "lo": 35.0, "hi": 43.0, "p": 1e-9, "rounds": 60, "over": "blocks of 1 s", "blocks": 60,
              "a_mean": 345.0, "resolution": None}
    go["workloads"]["ping"]["breakdown"] = {"socket_new": {"figures": {"client_p50_ms": blocks}}}
    g = compare.compare({"go": go})["stacks"]["go"]["workloads"]["ping"]["uds-lo/tcp-lo"]
    assert g["p50_saved_us"] is blocks and g["verdict"] == "the socket saves"
    go["phases"] = []
    g = compare.compare({"go": go})["stacks"]["go"]["workloads"]["ping"]["uds-lo/tcp-lo"]
    assert g["p50_saved_us"] is blocks and g["app_cpu_saved_us"] is None


def test_saving_hidden_and_not_measurable():
    go = rep("c-go", {"tcp-lo": [1.0, 1.1, 1.0], "uds-lo": [0.7, 0.81, 0.69], "tcp": [1.3, 1.3, 1.2],
                      "uds": [0.7, 0.8, 0.7], "tcp-lo-ka": [0.6, 0.7, 0.6], "uds-lo-ka": [0.65, 0.6, 0.62]})
    # PHP: the same 100 µs or so saved, out of a 5 ms median: under 5%, hidden.
    php = rep("c-php", {"tcp-lo": [5.1, 5.2, 5.1], "uds-lo": [5.0, 5.11, 4.99]})
    c = compare.compare({"go": go, "php-fpm": php})
    assert c["pairs"] == ["uds-lo/tcp-lo", "uds-lo-ka/tcp-lo-ka", "uds/tcp", "uds-ka/tcp-ka"]
    g = c["stacks"]["go"]["workloads"]["ping"]
    assert g["uds-lo/tcp-lo"]["verdict"] == "the socket saves"
    assert g["uds-lo/tcp-lo"]["p50_saved_us"]["mean"] == pytest.approx(300)
    assert g["uds-lo/tcp-lo"]["share_of_tcp_median"] == pytest.approx(300 / 1033.33, rel=1e-3)
    assert g["uds/tcp"]["verdict"] == "the socket saves"
    assert g["uds-lo-ka/tcp-lo-ka"]["verdict"] == "no measurable difference"  # -50 to +100 µs
    assert "uds-ka/tcp-ka" not in g  # not measured
    p = c["stacks"]["php-fpm"]["workloads"]["ping"]
    assert p["uds-lo/tcp-lo"]["verdict"] == "hidden by the stack's own time"
    md = compare.render(c)
    assert "| stack | tcp-lo's median |" in md
    assert "| go | 1,033 µs | the socket saves: 300 µs (95% CI 275 to 325 µs, 3 rounds, 29%)" in md
    assert ("| php-fpm | 5,133 µs | hidden by the stack's own time: 100 µs (95% CI 75 to 125 µs, 3 rounds, 2%) "
            "| not measured (uds-lo-ka and tcp-lo-ka not in PATHS) |") in md
    assert "no measurable difference (95% CI -187 to 207 µs, 3 rounds)" in md
    assert "- php-fpm: the socket's gain is real but under 5% of the stack's own median" in md
    assert "- go: the socket's gain stands out of the stack's own time on uds-lo vs tcp-lo, uds vs tcp." in md
    assert "1 round only" not in md


def test_costs_more_and_one_round_are_said():
    c = compare.compare({"go": rep("c", {"tcp-lo": [1.0, 1.0, 1.0], "uds-lo": [1.2, 1.3, 1.25]})})
    assert "- go: no gain from the socket; it costs more on uds-lo vs tcp-lo." in compare.render(c)
    c = compare.compare({"go": rep("c", {"tcp-lo": [1.0], "uds-lo": [0.5]})})
    md = compare.render(c)
    assert "**1 round only**: no interval, no verdict" in md and "| 1 round: 500 µs, no interval |" in md


@pytest.mark.parametrize("tcp,uds,verdict", [
    ([1.0, 1.0, 1.0], [0.94, 0.941, 0.939], "the socket saves"),                # 60 µs of TCP's 1,000: 6%
    ([1.0, 1.0, 1.0], [0.96, 0.961, 0.959], "hidden by the stack's own time"),  # 40 µs: 4%
    ([1.0, 1.0], [0.94, 0.94], "2 rounds, all equal: no interval"),
    ([1.0, 1.0, 1.0], [1.1, 1.2, 1.15], "the socket costs more"),
    ([1.0, 1.0], [0.9, 1.1], "no measurable difference"),
    ([1.0], [0.5], "1 round: no interval"),
])
def test_verdict_boundaries(tcp, uds, verdict):
    g = compare.gains(rep("x", {"tcp-lo": tcp, "uds-lo": uds}))["ping"]["uds-lo/tcp-lo"]
    assert g["verdict"] == verdict


def test_a_stack_that_does_not_pool_gets_no_pooled_verdict():
    """gunicorn's sync workers close every connection (its report found so,
    from catalogue.json: pools false): its -ka paths opened one per request
    like the others, so no saving "with pooled connections" is credited to it."""
    p50 = {"tcp-lo": [1.0, 1.0, 1.0], "uds-lo": [0.9, 0.91, 0.89], "tcp-lo-ka": [1.0, 1.0, 1.0], "uds-lo-ka": [0.9, 0.91, 0.89]}
    unpooled = {"socket_pooled": "gunicorn closes every connection (catalogue.json)"}
    c = compare.compare({"gunicorn": rep("g", p50, not_pooled=unpooled), "node": rep("n", p50)})
    g, n = c["stacks"]["gunicorn"]["workloads"]["ping"], c["stacks"]["node"]["workloads"]["ping"]
    assert g["uds-lo-ka/tcp-lo-ka"]["verdict"] == compare.NOT_POOLED and g["uds-lo/tcp-lo"]["verdict"] == "the socket saves"
    assert n["uds-lo-ka/tcp-lo-ka"]["verdict"] == "the socket saves"
    md = compare.render(c)
    assert "| gunicorn | 1,000 µs | the socket saves: 100 µs" in md and "not pooled: the stack closes every connection |" in md


def test_hidden_share_boundary():
    # Exactly at 5% of TCP's median is not hidden; just under is.
    at = compare.verdict({"mean": 50.0, "lo": 45.0, "hi": 55.0, "p": 0.0, "rounds": 2, "a_mean": 1000.0})
    under = compare.verdict({"mean": 49.9, "lo": 45.0, "hi": 55.0, "p": 0.0, "rounds": 2, "a_mean": 1000.0})
    assert (at, under) == ("the socket saves", "hidden by the stack's own time")


def test_app_cpu_saved_and_missing():
    g = compare.gains(rep("x", {"tcp": [1.0, 1.0], "uds": [0.9, 0.9]},
                          cpu={"tcp": [130.0, 140.0], "uds": [40.0, 40.0]}))["ping"]["uds/tcp"]
    assert g["app_cpu_saved_us"]["mean"] == pytest.approx(95)
    g = compare.gains(rep("x", {"tcp": [1.0, 1.0], "uds": [0.9, 0.9]}))["ping"]["uds/tcp"]
    assert g["app_cpu_saved_us"] is None  # a stack without metrics (and no cAdvisor)


def test_main_writes_and_refuses(tmp_path, capsys):
    for stack in ("go", "node"):
        (tmp_path / f"c-{stack}").mkdir()
        (tmp_path / f"c-{stack}" / "report.json").write_text(json.dumps(rep(f"c-{stack}", {"tcp-lo": [1, 1], "uds-lo": [0.5, 0.5]})))
    assert compare.main(["--runs", "go=c-go,node=c-node", "--out", "c", "--results", str(tmp_path)]) == 0
    c = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert list(c["stacks"]) == ["go", "node"]
    assert "## `ping`" in (tmp_path / "c" / "compare.md").read_text()
    assert compare.main(["--runs", "go=c-go,php-fpm=c-php", "--out", "c", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "php-fpm" in err and "make report RUN=c-php" in err
    assert compare.main(["--runs", "go", "--out", "c", "--results", str(tmp_path)]) == 2
    assert "want stack=testid" in capsys.readouterr().err


def test_a_column_without_its_paths_says_which_were_left_out():
    c = compare.compare({"go": rep("c-go", {"tcp": [1.0, 1.1], "uds": [0.7, 0.8]})})
    md = compare.render(c)
    assert "| go | n/a (uds-lo and tcp-lo not in PATHS) | not measured (uds-lo and tcp-lo not in PATHS) |" in md


def test_a_rounds_only_run_is_judged_as_its_report_judged_it():
    """A run without the interleaved stream: compare takes the report's own
    figure, with the report's corrections (here Benjamini-Hochberg took the
    saving back), not a fresh, uncorrected one from the rounds."""
    go = rep("c-go", {"tcp-lo": [1.0, 1.1, 1.0], "uds-lo": [0.7, 0.81, 0.69]})
    judged = {"mean": 300.0, "lo": 275.0, "hi": 325.0, "p": 0.004, "p_holm": 0.016, "p_fdr": 0.06, "rounds": 3,
              "a_mean": 1033.0, "resolution": None, "fdr_family": 120}
    go["workloads"]["ping"]["breakdown"] = {"socket_new": {"figures": {"client_p50_ms": judged}}}
    g = compare.compare({"go": go})["stacks"]["go"]["workloads"]["ping"]["uds-lo/tcp-lo"]
    assert g["p50_saved_us"] is judged and g["verdict"] == "no measurable difference"


def test_each_stacks_generator_is_named_and_a_mix_is_said():
    go = rep("c-go", {"tcp-lo": [1.0, 1.1, 1.0], "uds-lo": [0.7, 0.81, 0.69]})
    php = rep("c-php", {"tcp-lo": [5.1, 5.2, 5.1], "uds-lo": [5.0, 5.11, 4.99]})
    php["settings"]["generator"] = "wrk"
    c = compare.compare({"go": go, "php-fpm": php})
    assert [st["generator"] for st in c["stacks"].values()] == ["k6", "wrk"]
    md = compare.render(c)
    assert "- go: `results/c-go/report.md`, load from k6 (0 warnings)" in md
    assert "- php-fpm: `results/c-php/report.md`, load from wrk (0 warnings)" in md
    assert "different load generators" in md
    php["settings"]["generator"] = "k6"
    assert "different load generators" not in compare.render(compare.compare({"go": go, "php-fpm": php}))
