"""report.md's text: the machine block and the tables, the thresholds and
the method "How to read this" states (the code's own constants), the
README's list of warnings, and what a table's cell says of an interval that
includes no difference, a single round, a path not measured, a figure
missing or a round left out."""
import json
import re

from report import markdown
from report.testkit import ROOT, build, by_phase, host_switches, kinds, make_k6, server_table


# ---------------------------------------------------------------- the machine block and the tables


def test_markdown_has_machine_block_and_tables():
    rep = build(make_k6(workloads=("ping", "bytes-1k")))
    md = markdown.render_markdown(rep)
    assert md.startswith("# uds-lab report: run `t1`")
    assert "Linux 6.8.0 x86_64 (node lab), 8 cores, 16.0 GiB memory" in md
    assert "Prometheus 3.5.1" in md
    assert "nginx: cpus 1, cpuset 0, memory 128.0 MiB, worker_processes 1" in md
    assert "`grafana/k6:1.8.1`" in md
    assert "rate=100" in md and "paths=tcp,uds,tcp-ka,uds-ka" in md
    assert "## Workload `ping`" in md and "## Workload `bytes-1k`" in md
    assert ("| path | req/s | client p50 | p95 | p99 (ms) | app p50 | p99 (ms) | nginx connect (ms) | app CPU µs/req | "
            "app ctx switches/req | nginx CPU µs/req | host ctx switches/req above idle | errors |") in md
    assert "| tcp | 100.0 | 1.000 | 2.000 | 3.000 | 0.400 | 2.000 | 0.001 | 50.0 | 2.50 | 80.0 | 3.00 | none |" in md
    assert ("| path | req/s ratio | p50 ratio (95% CI) | p99 ratio | app CPU ratio | app ctx switches ratio | "
            "nginx CPU ratio | host ctx switches ratio |") in md
    assert "Idle baseline: the host made 100 context switches/s with no requests (10 s before the first phase" in md
    assert "| uds | 1.00x (3 rounds, all equal) |" in md
    assert "1 ms resolution" in md
    assert "this machine" in md
    assert "## Warnings" in md
    json.dumps(rep)  # report.json is plain JSON


# ---------------------------------------------------------------- the rules stated


def test_thresholds_are_stated():
    md = markdown.render_markdown(build(make_k6()))
    for text in ("more than 1% of a phase's requests", "more than 5% over 1 ms behind", "less than 95% of RATE", "90% or more of its CPU limit",
                 "under 5 s", "within 5% of the others", "An interval that includes no difference is shown in its table"):
        assert text in md


def test_how_to_read_this_is_the_codes_method_and_constants(monkeypatch):
    """"How to read this" said the answer came from the rounds ("Every
    difference and ratio comes with its 95% interval, from the paired
    per-round values") after the stream had replaced them: it is made from
    the constants and the method the code uses, and follows them."""
    from report import interleaved, markdown_howto
    rep = build(make_k6())
    how = markdown.render_markdown(rep).split("## How to read this")[1]
    assert "from the paired per-round values" not in how
    assert interleaved.METHOD.split(",")[1].strip().startswith("t-interval with an equal-weighted cosine")
    assert "equal-weighted cosine estimator's, on floor(0.4 n^(2/3)) degrees of freedom (6 at 60 blocks)" in how
    assert "a block's median needs 5 successful requests on each path, an interval 10 blocks" in how
    assert "failed more than 1% of its requests gets no verdict" in how and "no difference larger than ±2%" in how
    monkeypatch.setattr(markdown_howto, "MIN_BLOCK_REQUESTS", 7)
    monkeypatch.setattr(markdown_howto, "MAX_FAILED_SHARE", 0.03)
    how = markdown.render_markdown({**rep, "margin_pct": 5}).split("## How to read this")[1]
    assert "needs 7 successful requests" in how and "more than 3% of its requests" in how and "±5%" in how


def test_the_report_says_the_apps_figures_are_the_apps_own():
    """The app under test exports its own costs: a swapped-in image could say anything (docs/design.md)."""
    md = markdown.render_markdown(build(make_k6()))
    assert "the app under test measures itself" in md and "Prometheus keeps of each target only its own series" in md


def test_readme_lists_every_warning():
    """report/README.md's table names every kind of warning the code raises."""
    code = "".join(p.read_text() for p in (ROOT / "report").glob("*.py") if not p.name.startswith("test_"))
    raised = set(re.findall(r'warning\(\s*"([a-z_0-9]+)"', code)) | set(re.findall(r'\(\s*"([a-z_]+)", (?:lambda|error_reasons)', code))
    readme = (ROOT / "report" / "README.md").read_text()
    assert {"saturated", "errors", "short_phase", "same_ceiling", "generator_cpu_unknown"} <= raised
    assert [k for k in sorted(raised) if f"`{k}`" not in readme] == []


def test_a_warning_names_a_few_phases_not_all_of_them():
    assert markdown.phases_named([], 10) == ""
    assert markdown.phases_named(["a", "b"], 10) == " Phases: a, b."
    assert markdown.phases_named([f"p{i}" for i in range(14)], 14) == " Phases: all 14."
    assert markdown.phases_named([f"p{i}" for i in range(9)], 14) == " Phases: p0, p1, p2 and 6 more (report.json lists them)."


# ---------------------------------------------------------------- what a cell says


def test_ratios_whose_interval_includes_one_are_said_in_their_table_not_warned_about():
    p50 = {"tcp": [1.0, 1.0, 1.0], "uds": [0.9, 1.05, 0.95]}
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"duration_ms": {"p50": p50[p][r - 1]}} if r else {})
    rep = build(k6)
    e = rep["workloads"]["ping"]["paths"]["uds"]
    assert e["verdict"] == "no measurable difference from tcp (95% CI 0.79-1.17x, 3 rounds)"
    assert "spread" not in kinds(rep)
    md = markdown.render_markdown(rep)
    # Its interval in the table; identical rounds (client p99): no spread, so no interval and no verdict.
    assert "| uds | 1.00x (1 round" not in md and "0.96x (0.79-1.17)" in md and "1.00x (3 rounds, all equal)" in md


def test_single_round():
    rep = build(make_k6(paths=("tcp", "uds"), rounds=1, client=lambda p, r: {"duration_ms": {"p50": 0.5}} if p == "uds" else {}))
    assert "single_round" not in kinds(rep) and "spread" not in kinds(rep)
    assert rep["workloads"]["ping"]["paths"]["uds"]["verdict"] == "uds 0.50x tcp (1 round: no interval, no verdict)"
    assert "0.50x (1 round)" in markdown.render_markdown(rep)


def test_tcp_missing():
    rep = build(make_k6(paths=("uds", "uds-ka")))
    assert "tcp_missing" not in kinds(rep)  # said under the table, no action to take
    wl = rep["workloads"]["ping"]
    assert wl["tcp_measured"] is False
    assert all(e["ratio_to_tcp"] is None for e in wl["paths"].values())
    md = markdown.render_markdown(rep)
    assert "tcp was not measured in this run" in md
    assert "| uds | 100.0 |" in md


def test_an_app_figure_missing_in_every_round_says_why_in_its_cell():
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    rep = build(k6, server_table(k6, {"histogram_quantile(0.5,": None, "histogram_quantile(0.99,": None}))
    row = next(l for l in markdown.render_markdown(rep).splitlines() if l.startswith("| tcp | "))
    assert row.count("n/a (") >= 2 and "| n/a |" not in row.replace("n/a (cAdvisor", "x"), row


def test_a_ratio_left_out_for_a_negative_round_is_said_in_its_cell():
    """The host's switches above idle came out below 0 in one round of uds:
    that round has no ratio, and the cell says one was left out."""
    k6 = make_k6(paths=("tcp", "uds"), rounds=3)
    host = host_switches(k6, by_phase(k6, lambda path, r: 500 if (path, r) == ("uds", 2) else 4000 + 37 * r * (path == "uds")))
    rep = build(k6, server_table(k6, {"node_context_switches_total": host}))
    r = rep["workloads"]["ping"]["paths"]["uds"]["ratio_to_tcp"]["host_ctx_switches_per_req"]
    assert r["rounds"] == 2 and r["dropped"] == 1
    assert "; 1 round left out)" in markdown.render_markdown(rep)
