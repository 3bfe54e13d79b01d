"""The whole report held to its error rate: reports built through the
report's own code (context.build_report on a load.json as a run writes it,
and a fake Prometheus), in which every path is the same, must state a
difference as a finding in at most 5% of them (one-sided binomial test, as
the calibration tests). Each report judges about a hundred figures; before
the report-wide correction (Benjamini-Hochberg) about nine in ten such
reports stated at least one difference.

Where the values come from, with no true difference anywhere:
- the interleaved stream's per-second medians: one real run's series from
  report/testdata/interleaved.json (the machine's swings) plus, per path,
  stretches of the real A/A half-differences ((uds - uds-aa) / sqrt 2, signs
  drawn at random; their autocorrelation kept), so two paths differ by a
  real A/A difference;
- the rounds of one path at a time, client and server figures alike: one
  value for every path, times a factor per round shared by the paths (the
  machine's +-15% swing) and a heavy-tailed factor per phase (Student's t,
  3 degrees of freedom: the lab's phases have outliers), independent from
  round to round or, as a stress case, correlated at lag 1 (rounds_ar)."""
import re

import numpy as np
import pytest
from scipy.stats import binomtest

from report import context, markdown
from report.markdown import fmt_ratio
from report.stats import ALPHA, has_interval, lost_to
from report.test_calibration_lab import AA, DATA
from report.testkit import COMPOSE, fake_query, host_switches, make_k6, server_table, window_ends

EIGHT = ("tcp", "tcp-ka", "tcp-lo", "tcp-lo-ka", "uds", "uds-ka", "uds-lo", "uds-lo-ka")
PINNED = {"services": {**COMPOSE["services"], "app": {**COMPOSE["services"]["app"], "cpuset": "1"},
                       "k6": {**COMPOSE["services"]["k6"], "cpuset": "2,3"}}}
REPORTS = 80
ROUNDS = 4
# What a reader takes for a stated difference: the answer's and the breakdown's
# words and numbers, a ratio's verdict, a failed control, a bold number.
FINDINGS = [
    re.compile(r"\b(saved|cost) [\d,.]+ µs"),
    re.compile(r"\b(faster|slower) by [\d,.]+ µs"),
    re.compile(r"\bcarried [\d.]+x"),
    re.compile(r"control failed"),
    re.compile(r"\| [\w-]+ [\d.]+x tcp \(95% CI"),
    re.compile(r"\| -?[\d,]+\.\d(?: µs)? \(95% CI"),
    re.compile(r"(?<!no )measurable difference"),
]
BOLD = re.compile(r"\*\*(.+?)\*\*")
# The ratio table's columns (markdown.py's): a cell shows its interval only
# where the correction left it, so one whose interval excludes 1 is a claim.
RATIO_COLUMNS = ("rps", "client_p50_ms", "client_p99_ms", "app_cpu_us_per_req", "app_ctx_switches_per_req",
                 "nginx_cpu_us_per_req", "host_ctx_switches_per_req")


def ratio_claims(rep):
    """The ratio table's cells that state a difference: their interval, left
    by the correction and above the counter's resolution, excludes 1."""
    return [f"{path} {k} {fmt_ratio(r)}" for wl in rep["workloads"].values() for path, e in wl["paths"].items()
            for k in RATIO_COLUMNS if (r := (e["ratio_to_tcp"] or {}).get(k)) and has_interval(r)
            and not r.get("below_resolution") and not lost_to(r) and (r["lo"] > 1 or r["hi"] < 1)]


def findings(md, bold=True):
    """The claims worded as findings; bold: a bold number too (a sweep's
    answer labels each step with its rate in bold: not a claim)."""
    return [m.group(0) for f in FINDINGS for m in f.finditer(md)] + \
        ([b for b in BOLD.findall(md) if re.search(r"\d", b) and not b.startswith("no difference")] if bold else [])


def claims(rep):
    """Every claim a report makes: its report.md's findings and its ratio cells'."""
    return findings(markdown.render_markdown(rep)) + ratio_claims(rep)


def aa_halves():
    """Every real A/A pair's per-second half-difference (µs), a list per pair."""
    out = []
    for run in DATA["runs"]:
        for a, b in AA:
            xs, ys = run["blocks_us"].get(a), run["blocks_us"].get(b)
            if xs and ys:
                out.append([None if x is None or y is None else (x - y) / 2 ** 0.5 for x, y in zip(xs, ys)])
    return out


HALVES = aa_halves()


def stitched(rng, n):
    """n seconds of A/A half-differences: stretches (mean 10 s) from random pairs and offsets, random signs."""
    out = []
    while len(out) < n:
        s = HALVES[rng.integers(len(HALVES))]
        length = min(int(rng.geometric(0.1)), len(s))
        start = int(rng.integers(len(s) - length + 1))
        sign = 1 if rng.random() < 0.5 else -1
        out += [None if v is None else sign * v for v in s[start:start + length]]
    return out[:n]


# The spread of a path's own noise per second (µs): the real A/A
# half-differences' standard deviation, about 10 µs.
SCALE = float(np.std([x for h in HALVES for x in h if x is not None]))


def seconds_noise(rng, kind, n):
    """n seconds of a path's own noise (µs) of one kind: the real A/A
    half-differences (their autocorrelation kept), independent normal,
    heavy-tailed (Student's t, 3 degrees of freedom), or correlated at lag 1
    (AR(1), 0.6), each with the real spread."""
    if kind == "real":
        return stitched(rng, n)
    if kind == "normal":
        return list(SCALE * rng.standard_normal(n))
    if kind == "t3":
        return list(SCALE * rng.standard_t(3, n) / 3 ** 0.5)
    phi = float(kind.removeprefix("ar"))
    x, out = rng.standard_normal(), []
    for e in rng.standard_normal(n):
        x = phi * x + (1 - phi ** 2) ** 0.5 * e
        out.append(SCALE * x)
    return out


def mixed_blocks(rng, paths, n=60, noise="real", shift=None):
    """An interleaved phase's by_path: every path the same n seconds of one
    real run (the machine's swings) plus its own noise; shift: {path: µs}
    added to a path's every second (a true difference, for power)."""
    run = DATA["runs"][rng.integers(len(DATA["runs"]))]
    start = int(rng.integers(len(run["blocks_us"]["uds-lo"]) - n + 1))
    base = run["blocks_us"]["uds-lo"][start:start + n]
    by_path = {}
    for p in paths:
        own = seconds_noise(rng, noise, n)
        add = (shift or {}).get(p, 0.0)
        blocks = [{"requests": 62, "p50": None if b is None or e is None else max(1.0, b + e + add) / 1e3}
                  for b, e in zip(base, own)]
        by_path[p] = {"requests": 62 * n, "failed_rate": 0, "blocks": blocks,
                      "duration_ms": {"p50": 0.3, "p99": 1.2}}
    return by_path


def noisy(rng, rounds, ar=0.0):
    """f(path, round) -> a factor: the round's swing, shared by its paths,
    times the phase's own (heavy-tailed); ar: each path's own factor
    correlated from round to round at lag 1 (AR(1) over its rounds, the
    same spread), a stress model: a path that ran slow stays slow into its
    next round, which pairing by round does not cancel."""
    swing = {r: 1 + rng.uniform(-0.15, 0.15) for r in range(rounds + 1)}
    own = {}

    def factor(path, r):
        if (path, r) in own:
            return own[(path, r)]
        if not ar:
            own[(path, r)] = swing[r] * max(0.5, 1 + 0.05 * rng.standard_t(3))
            return own[(path, r)]
        e = rng.standard_t(3)  # the path's every round at once, in their order
        for q in range(rounds + 1):
            e = e if q == 0 else ar * e + (1 - ar ** 2) ** 0.5 * rng.standard_t(3)
            own[(path, q)] = swing[q] * max(0.5, 1 + 0.05 * e)
        return own[(path, r)]
    return factor


def null_run(rng, mode="rate", interleave=60, noise="real", shift=None, cost=None, rounds_ar=0.0):
    """(load.json, Prometheus table): a run of the eight paths, all the same
    (but shift: {path: µs} in the streams, and cost: {path: factor} on its app
    CPU per request: true differences, for power); make load's streams one per
    connection handling, interleave seconds each, their seconds' own noise
    of one kind (seconds_noise); rounds_ar: the rounds' own factors
    correlated at lag 1 (noisy())."""
    f = noisy(rng, ROUNDS, rounds_ar)
    client = lambda p, r: {"duration_ms": {"p50": 0.4 * f(p, r), "p95": 0.9 * f(p, r), "p99": 1.6 * f(p, r)}}  # noqa: E731
    if mode == "max":
        k6 = make_k6(paths=EIGHT, rounds=ROUNDS, rate=500, duration=5,
                     client=lambda p, r: {**client(p, r), "requests": int(20000 * f(p, r))})
        k6["settings"].update({"mode": "max", "connections": 64})
    else:  # make load: a stream per connection handling first (plan.py's), then the rounds
        k6 = make_k6(paths=EIGHT, rounds=ROUNDS, rate=500, duration=5, interleave=interleave, block=1, split=True,
                     client=lambda p, r: {} if p == "mix" else client(p, r))
        for ph in k6["phases"]:
            if ph["path"] == "mix":
                ph["by_path"] = mixed_blocks(rng, ph["paths"], interleave, noise, shift) if ph["round"] else {}
    ends = {v: k for k, v in window_ends(k6).items()}
    phases = {p["name"]: p for p in k6["phases"]}

    def per_phase(value, factor=None):
        def get(expr):
            m = re.search(r"@ ([0-9.]+)", expr)
            ph = phases[ends[m.group(1)]]
            own = (factor or {}).get(ph["path"], 1.0)
            return value * own * f(ph["path"], ph["round"]) * max(0.5, 1 + 0.05 * rng.standard_t(3))
        return get
    over = {"process_cpu_seconds_total": per_phase(0.125, cost)}
    over.update({k: per_phase(v) for k, v in (
        ("histogram_quantile(0.5,", 0.0004), ("histogram_quantile(0.99,", 0.002),
        (("container_cpu_usage_seconds_total", 'service="nginx"'), 0.2),
        ("app_process_context_switches_total", 6000), ("upstream_connect_seconds_sum", 0.0025))})
    over["node_context_switches_total"] = host_switches(k6, per_phase(12000))
    over.update({("node_cpu_seconds_total", 'cpu=~"0|1"', f'mode="{m}"'): per_phase(v)
                 for m, v in (("user", 0.2), ("system", 0.15), ("softirq", 0.05), ("irq", 0.002))})
    table = server_table(k6, over)
    table.update({"app_http_requests_total": 2500, "nginx_http_requests_total": 2500,
                  "upstream_connect_seconds_count": 2500})
    return k6, table


def share_with_findings(mode, seed, reports=REPORTS, **kw):
    rng = np.random.default_rng(seed)
    hits, said = 0, []
    for _ in range(reports):
        k6, table = null_run(rng, mode, **kw)
        rep = context.build_report(k6, PINNED, fake_query(table))
        found = claims(rep)
        hits += bool(found)
        said += found[:1]
    return hits, said


def test_a_ratio_cell_that_survives_the_correction_is_counted_as_a_claim():
    """uds's p99 is 1.53x tcp's in every round (1.49-1.57 after the
    correction), and nothing else differs: the ratio table's cell is the
    report's one claim, and the null test counts it."""
    from report.testkit import build
    swing = {1: 1.0, 2: 1.1, 3: 0.95}
    k6 = make_k6(paths=("tcp", "uds"), client=lambda p, r: {"duration_ms": {
        "p99": 3.0 * swing[r] * (1.5 * (1 + 0.01 * r) if p == "uds" else 1.0)}} if r else {})
    assert claims(build(k6)) == ["uds client_p99_ms 1.53x (1.49-1.57)"]


@pytest.mark.parametrize("noise", ["real", "normal", "t3", "ar0.6"])
@pytest.mark.parametrize("interleave", [10, 20, 60])
def test_a_report_of_eight_identical_paths_states_no_difference_but_at_the_error_rate(interleave, noise):
    """make load at every INTERLEAVE the docs use (plan.py allows 10 and up),
    its seconds independent, heavy-tailed, correlated or the lab's own."""
    seed = 31 + 10 * interleave + ["real", "normal", "t3", "ar0.6"].index(noise)
    hits, said = share_with_findings("rate", seed, REPORTS, interleave=interleave, noise=noise)
    assert binomtest(hits, REPORTS, ALPHA, alternative="greater").pvalue > 0.01, (hits / REPORTS, said[:5])


def test_a_max_report_of_eight_identical_paths_states_no_difference_but_at_the_error_rate():
    hits, said = share_with_findings("max", 32, REPORTS // 2)
    assert binomtest(hits, REPORTS // 2, ALPHA, alternative="greater").pvalue > 0.01, (hits / (REPORTS // 2), said[:5])


def null_sweep(rng, rates=(500, 1000, 2000, 4000, 8000, 12000), rounds=3, interleave=0, noise="real"):
    """A make sweep of the eight paths, all the same, every step held; with
    interleave, each step's streams too (one per connection handling, as
    plan.py runs a sweep of rates by default), whose seconds give its savings."""
    from report.test_sweep import load, phase
    ph = []
    for s, rate in enumerate(rates, 1):
        f = noisy(rng, rounds)
        ph += [phase(p, s, rate, r, p50=0.4 * f(p, r), p99=1.6 * f(p, r)) for p in EIGHT for r in range(1, rounds + 1)]
        for kind, paths in (("pooled", [p for p in EIGHT if p.endswith("-ka")]),
                            ("new", [p for p in EIGHT if not p.endswith("-ka")])):
            if interleave:
                by_path = mixed_blocks(rng, paths, interleave, noise)
                for v in by_path.values():
                    v["requests"] = rate * interleave // len(paths)
                ph.append({"name": f"ping__mix-{kind}__s{s}__r1", "workload": "ping", "path": "mix", "round": 1,
                           "phase": "measure", "endpoint": "/ping", "start_offset_s": 0, "duration_s": interleave,
                           "requests": rate * interleave, "failed_rate": 0.0, "dropped_iterations": 0, "step": s,
                           "rate": rate, "paths": paths, "stream": kind, "block_s": 1, "by_path": by_path})
    doc = load(ph, rates)
    doc["settings"]["paths"] = list(EIGHT)
    return doc


@pytest.mark.parametrize("interleave", [0, 60])
def test_a_sweep_of_eight_identical_paths_states_no_saving_but_at_the_error_rate(interleave):
    """Six steps of four pairs: judged a step at a time, about one such sweep
    in four stated a saving; judged all together, at most 5%. With each
    step's streams (the default) the savings are their seconds'; without
    (INTERLEAVE=0), the rounds'."""
    from report import sweep, sweep_render
    rng = np.random.default_rng(33 + interleave)
    runs = 100
    said = [findings(sweep_render.render(sweep.build(null_sweep(rng, interleave=interleave))), bold=False)
            for _ in range(runs)]
    hits = sum(bool(x) for x in said)
    assert binomtest(hits, runs, ALPHA, alternative="greater").pvalue > 0.01, (hits / runs, [x for x in said if x][:3])


def test_the_answer_finds_four_percent_at_the_defaults():
    """Power at make load's defaults (INTERLEAVE=60, the lab's own seconds), in
    a run shaped as the lab's (new connections cost every path 130-160 µs and
    60% more app CPU, so the report's other comparisons differ too): a true
    12 µs (4% of the median) saving of uds-lo against tcp-lo is found in
    about 87% of reports (docs/statistics.md's power table); at least 70% of
    40 here."""
    rng = np.random.default_rng(9)
    found = 0
    for _ in range(40):
        shift = {"tcp": 160, "tcp-lo": 130, "uds": 118, "uds-lo": 118}
        cost = {p: 1.6 for p in ("tcp", "tcp-lo", "uds", "uds-lo")}
        k6, table = null_run(rng, "rate", interleave=60, shift=shift, cost=cost)
        rows = context.build_report(k6, PINNED, fake_query(table))["workloads"]["ping"]["answer_parts"]["rows"]
        row = next(r for r in rows if r["pair"] == ["uds-lo", "tcp-lo"])
        found += row["verdict"] == "differs" and row["saved_us"] > 0
    assert found >= 28, found


def test_the_answer_finds_three_percent_inside_a_full_report():
    """The answer is its own family (Holm at 4%), not one of the report's
    ~150 comparisons (Benjamini-Hochberg): a true 3% saving of uds-lo
    against tcp-lo (9 µs of about 300), every other path the same, is found
    in at least 70% of 40 full reports at INTERLEAVE=60 (docs/statistics.md
    has the power measured, and the power judged with the report, as before)."""
    rng = np.random.default_rng(65)
    found = 0
    for _ in range(40):
        k6, table = null_run(rng, "rate", interleave=60, shift={"uds-lo": -9.0})
        rows = context.build_report(k6, PINNED, fake_query(table))["workloads"]["ping"]["answer_parts"]["rows"]
        row = next(r for r in rows if r["pair"] == ["uds-lo", "tcp-lo"])
        found += row["verdict"] == "differs" and row["saved_us"] > 0
    assert found >= 28, found


@pytest.mark.parametrize("ar", [0.3, 0.6])
def test_a_report_whose_rounds_correlate_states_no_difference_but_at_the_error_rate(ar):
    """A stress case, not the lab's measured behaviour (4 rounds cannot
    measure it): each path's own factor correlated from round to round at
    lag 1 (noisy()), at make load's defaults. The answer comes from the
    stream and the rounds' claims are exploration (1%), so the report holds
    its 5%; when the answer was judged with the rest at 5%, 19% of such
    reports stated a difference at 0.6 (docs/statistics.md)."""
    seed = 41 + round(ar * 10)
    hits, said = share_with_findings("rate", seed, REPORTS, interleave=60, rounds_ar=ar)
    assert binomtest(hits, REPORTS, ALPHA, alternative="greater").pvalue > 0.01, (hits / REPORTS, said[:5])
