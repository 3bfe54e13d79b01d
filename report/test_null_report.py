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
  3 degrees of freedom: the lab's phases have outliers)."""
import re

import numpy as np
from scipy.stats import binomtest

from report import context, markdown
from report.stats import ALPHA
from report.test_calibration_lab import AA, DATA
from report.test_report import COMPOSE, fake_query, host_switches, make_k6, server_table, window_ends

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


def findings(md, bold=True):
    """The claims worded as findings; bold: a bold number too (a sweep's
    answer labels each step with its rate in bold: not a claim)."""
    return [m.group(0) for f in FINDINGS for m in f.finditer(md)] + \
        ([b for b in BOLD.findall(md) if re.search(r"\d", b) and not b.startswith("no difference")] if bold else [])


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


def mixed_blocks(rng, paths):
    """The interleaved phase's by_path: every path one real run's seconds plus its own A/A noise."""
    run = DATA["runs"][rng.integers(len(DATA["runs"]))]
    base = run["blocks_us"]["uds-lo"]
    by_path = {}
    for p in paths:
        noise = stitched(rng, len(base))
        blocks = [{"requests": 62, "p50": None if b is None or e is None else max(1.0, b + e) / 1e3}
                  for b, e in zip(base, noise)]
        by_path[p] = {"requests": 62 * len(base), "failed_rate": 0, "blocks": blocks,
                      "duration_ms": {"p50": 0.3, "p99": 1.2}}
    return by_path


def noisy(rng, rounds):
    """f(path, round) -> a factor: the round's swing, shared by its paths, times the phase's own."""
    swing = {r: 1 + rng.uniform(-0.15, 0.15) for r in range(rounds + 1)}
    own = {}

    def factor(path, r):
        if (path, r) not in own:
            own[(path, r)] = swing[r] * max(0.5, 1 + 0.05 * rng.standard_t(3))
        return own[(path, r)]
    return factor


def null_run(rng, mode="rate"):
    """(load.json, Prometheus table): a run of the eight paths, all the same."""
    f = noisy(rng, ROUNDS)
    client = lambda p, r: {"duration_ms": {"p50": 0.4 * f(p, r), "p95": 0.9 * f(p, r), "p99": 1.6 * f(p, r)}}  # noqa: E731
    if mode == "max":
        k6 = make_k6(paths=EIGHT, rounds=ROUNDS, rate=500, duration=5,
                     client=lambda p, r: {**client(p, r), "requests": int(20000 * f(p, r))})
        k6["settings"].update({"mode": "max", "connections": 64})
    else:  # make load: the interleaved stream first (plan.py's), then the rounds
        blocks = mixed_blocks(rng, EIGHT)
        k6 = make_k6(paths=EIGHT, rounds=ROUNDS, rate=500, duration=5, interleave=60, block=1,
                     client=lambda p, r: {"by_path": blocks if r else {}} if p == "mix" else client(p, r))
    ends = {v: k for k, v in window_ends(k6).items()}
    phases = {p["name"]: p for p in k6["phases"]}

    def per_phase(value):
        def get(expr):
            m = re.search(r"@ ([0-9.]+)", expr)
            ph = phases[ends[m.group(1)]]
            return value * f(ph["path"], ph["round"]) * max(0.5, 1 + 0.05 * rng.standard_t(3))
        return get
    over = {k: per_phase(v) for k, v in (
        ("histogram_quantile(0.5,", 0.0004), ("histogram_quantile(0.99,", 0.002), ("process_cpu_seconds_total", 0.125),
        (("container_cpu_usage_seconds_total", 'service="nginx"'), 0.2),
        ("app_process_context_switches_total", 6000), ("upstream_connect_seconds_sum", 0.0025))}
    over["node_context_switches_total"] = host_switches(k6, per_phase(12000))
    over.update({("node_cpu_seconds_total", 'cpu=~"0|1"', f'mode="{m}"'): per_phase(v)
                 for m, v in (("user", 0.2), ("system", 0.15), ("softirq", 0.05), ("irq", 0.002))})
    table = server_table(k6, over)
    table.update({"app_http_requests_total": 2500, "nginx_http_requests_total": 2500,
                  "upstream_connect_seconds_count": 2500})
    return k6, table


def share_with_findings(mode, seed, reports=REPORTS):
    rng = np.random.default_rng(seed)
    hits, said = 0, []
    for _ in range(reports):
        k6, table = null_run(rng, mode)
        rep = context.build_report(k6, PINNED, fake_query(table))
        found = findings(markdown.render_markdown(rep))
        hits += bool(found)
        said += found[:1]
    return hits, said


def test_a_report_of_eight_identical_paths_states_no_difference_but_at_the_error_rate():
    hits, said = share_with_findings("rate", 31)
    assert binomtest(hits, REPORTS, ALPHA, alternative="greater").pvalue > 0.01, (hits / REPORTS, said[:5])


def test_a_max_report_of_eight_identical_paths_states_no_difference_but_at_the_error_rate():
    hits, said = share_with_findings("max", 32, REPORTS // 2)
    assert binomtest(hits, REPORTS // 2, ALPHA, alternative="greater").pvalue > 0.01, (hits / (REPORTS // 2), said[:5])


def null_sweep(rng, rates=(500, 1000, 2000, 4000, 8000, 12000), rounds=3):
    """A make sweep of the eight paths, all the same, every step held."""
    from report.test_sweep import load, phase
    ph = []
    for s, rate in enumerate(rates, 1):
        f = noisy(rng, rounds)
        ph += [phase(p, s, rate, r, p50=0.4 * f(p, r), p99=1.6 * f(p, r)) for p in EIGHT for r in range(1, rounds + 1)]
    doc = load(ph, rates)
    doc["settings"]["paths"] = list(EIGHT)
    return doc


def test_a_sweep_of_eight_identical_paths_states_no_saving_but_at_the_error_rate():
    """Six steps of four pairs: judged a step at a time, about one such sweep
    in four stated a saving; judged all together, at most 5%."""
    from report import sweep
    rng = np.random.default_rng(33)
    runs = 100
    said = [findings(sweep.render(sweep.build(null_sweep(rng))), bold=False) for _ in range(runs)]
    hits = sum(bool(x) for x in said)
    assert binomtest(hits, runs, ALPHA, alternative="greater").pvalue > 0.01, (hits / runs, [x for x in said if x][:3])
