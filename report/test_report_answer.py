"""The answer and where the time goes: the breakdown's terms as per-round
differences, the answer's comparisons through the same nginx, its controls,
Holm's correction, max mode's throughput, a stack that does not pool, a
PRECISION run's first stage, rounds not back to back, and the direct paths
set beside the same pair through nginx."""
import re

import pytest

from report import charts, markdown, queries, stats, words
from report.testkit import COMPOSE, build, by_phase, kinds, make_k6, max_k6, server_table


# ---------------------------------------------------------------- where the time goes


SIX = ("tcp", "uds", "tcp-ka", "uds-ka", "tcp-lo", "tcp-lo-ka", "uds-lo")


def p50_run(p50, **kw):
    """A run of the catalogue's paths whose client p50 per path and round (ms) is p50[path][round - 1]."""
    return make_k6(paths=tuple(p50), client=lambda p, r: {"duration_ms": {"p50": p50[p][r - 1]}} if r else {}, **kw)


def test_the_socket_across_the_network_stands_in_only_where_there_is_no_uds_path():
    """catalogue.json's socket_podnet_* terms (uds-lo against tcp, two nginx) are
    the answer's comparison across the network only in a run without uds (a
    Kubernetes run); with uds, the same-nginx pair is, and they are left out."""
    p50 = {"tcp": [1.00, 1.10, 1.05], "tcp-ka": [0.60, 0.62, 0.61], "tcp-lo": [0.80, 0.85, 0.82],
           "tcp-lo-ka": [0.50, 0.52, 0.50], "uds-lo": [0.56, 0.57, 0.55], "uds-lo-ka": [0.45, 0.47, 0.46]}
    on_k8s = build(p50_run(p50))["workloads"]["ping"]
    assert {"socket_podnet_new", "socket_podnet_pooled"} <= set(on_k8s["breakdown"])
    assert "`uds-lo` against `tcp`" in on_k8s["answer"] and "TCP across the network, from the other nginx" in on_k8s["answer"]
    with_uds = build(p50_run({**p50, "uds": [0.55, 0.58, 0.56], "uds-ka": [0.45, 0.47, 0.46]}))["workloads"]["ping"]
    assert "socket_bridge_new" in with_uds["breakdown"] and not {"socket_podnet_new", "socket_podnet_pooled"} & set(with_uds["breakdown"])
    assert "`uds-lo` against `tcp`" not in with_uds["answer"]


def test_breakdown_terms_are_per_round_differences_in_microseconds():
    p50 = {"tcp": [1.00, 1.10, 1.05], "tcp-ka": [0.60, 0.62, 0.61], "tcp-lo": [0.80, 0.85, 0.82],
           "tcp-lo-ka": [0.50, 0.52, 0.50], "uds": [0.55, 0.58, 0.56], "uds-ka": [0.45, 0.47, 0.46],
           "uds-lo": [0.56, 0.57, 0.55]}
    rep = build(p50_run(p50))
    terms = rep["workloads"]["ping"]["breakdown"]
    connect = terms["tcp_connect"]["figures"]["client_p50_ms"]
    assert connect["per_round"] == {"1": pytest.approx(400), "2": pytest.approx(480), "3": pytest.approx(440)}
    assert (connect["mean"], connect["min"], connect["max"]) == (pytest.approx(440), pytest.approx(400), pytest.approx(480))
    # The share is of the first path's figure (tcp's 1,050 µs), in the answer and the table alike.
    assert connect["relative"] == pytest.approx(440 / 1050)
    # 95% t-interval: sd 40 over 3 rounds, t(2) = 4.303.
    assert (connect["lo"], connect["hi"]) == (pytest.approx(440 - 4.3027 * 40 / 3 ** 0.5, abs=0.1),
                                              pytest.approx(440 + 4.3027 * 40 / 3 ** 0.5, abs=0.1))
    # The bridge, less the two nginx's own difference: (tcp - tcp-lo) - (uds - uds-lo) per round.
    bridge = terms["bridge_new"]["figures"]["client_p50_ms"]
    assert bridge["per_round"] == {"1": pytest.approx(210), "2": pytest.approx(240), "3": pytest.approx(220)}
    assert stats.measurable(connect) and stats.measurable(bridge)
    # The control: uds against uds-lo, -10, +10, +10 µs: its interval includes zero.
    control = terms["control_new"]["figures"]["client_p50_ms"]
    assert not stats.measurable(control)
    assert words.fmt_diff(control).startswith("no measurable difference (95% CI ")
    # uds-lo-ka was not measured: the terms that need it are left out, not zero.
    assert "control_pooled" not in terms and "bridge_pooled" not in terms and "socket_pooled" not in terms
    md = markdown.render_markdown(rep)
    assert ("| TCP connection setup, across the bridge | tcp − tcp-ka | 440.0 µs (95% CI 340.6 to 539.4 µs, "
            "3 rounds, 42% of the first)") in md
    assert "tcp − tcp-lo − (uds − uds-lo)" in md


EIGHT = {"tcp": [1.00, 1.10, 1.05], "tcp-ka": [0.60, 0.62, 0.61], "tcp-lo": [0.80, 0.85, 0.82],
         "tcp-lo-ka": [0.46, 0.45, 0.47], "uds": [0.55, 0.58, 0.56], "uds-ka": [0.45, 0.47, 0.46],
         "uds-lo": [0.55, 0.58, 0.56], "uds-lo-ka": [0.45, 0.47, 0.46]}


def test_answer_compares_paths_through_the_same_nginx():
    rep = build(p50_run(EIGHT, rate=500))
    text = rep["workloads"]["ping"]["answer"]
    assert "at 500 req/s" in text
    # tcp-lo - uds-lo = 250, 270, 260 µs: both through nginx-lo.
    assert ("With a new connection per request, the socket saved 260 µs (32% of tcp-lo's median) against TCP over "
            "loopback (`uds-lo` against `tcp-lo`: 95% CI 235 to 285 µs, 3 rounds)") in text
    # tcp - uds = 450, 520, 490 µs: both through nginx.
    assert "saved 487 µs (46% of tcp's median) against TCP across the Docker bridge (`uds` against `tcp`" in text
    # pooled: tcp-lo-ka - uds-lo-ka = +10, -20, +10 µs: neither excluding 0 nor inside ±2% (9 µs): not sure yet.
    assert ("With pooled keepalive connections, the socket is not told apart from TCP over loopback yet "
            "(`uds-lo-ka` against `tcp-lo-ka`: 95% CI -43 to 43 µs, 3 rounds, neither excluding 0 nor inside ±2%, "
            "9 µs): not sure yet; 3 usable rounds (2 degrees of freedom) are too few to say how much longer would "
            "decide") in text
    assert "the 4 comparisons are judged together (Holm's correction)" in text
    assert "Control held" in text and "control failed" not in text
    md = markdown.render_markdown(rep)
    answer = md[md.index("## The answer"):md.index("## Machine")]
    assert ("| new per request | TCP over loopback (`uds-lo` vs `tcp-lo`) | nginx-lo | 260 µs (32%) | 235 to 285 µs | "
            "**faster by 260 µs (32%)** |") in answer
    assert ("| pooled (keepalive) | TCP over loopback (`uds-lo-ka` vs `tcp-lo-ka`) | nginx-lo | — | -43 to 43 µs | "
            "not sure yet: 3 usable rounds (2 degrees of freedom) are too few to say how much longer would decide |") in answer
    # A control that held is not repeated; the method in one line, with its link.
    assert "Control held" not in answer and "[How to read this](#how-to-read-this)" in answer


def test_a_failed_control_is_said_next_to_the_answer():
    p50 = {**EIGHT, "uds-lo": [0.60, 0.64, 0.61]}  # nginx-lo 50-60 µs slower than nginx on the same socket
    text = build(p50_run(p50))["workloads"]["ping"]["answer"]
    assert "**the control failed**: nginx against nginx-lo, socket, new connections came out at -53 µs" in text


def test_an_aa_run_says_whether_the_path_differs_from_itself():
    same = build(p50_run({"uds": [0.50, 0.52, 0.49, 0.51], "uds-aa": [0.51, 0.50, 0.50, 0.52]}, rounds=4))
    text = same["workloads"]["ping"]["answer"]
    assert "no answer to give. Control held: A/A: the socket against itself, through nginx (calibration), " \
           "no measurable difference (95% CI" in text
    differs = build(p50_run({"uds": [0.50, 0.52, 0.49, 0.51], "uds-aa": [0.60, 0.62, 0.60, 0.61]}, rounds=4))
    assert "**the control failed**: A/A" in differs["workloads"]["ping"]["answer"]


def test_a_difference_holm_does_not_call_measurable_says_so_in_the_answer_and_the_table():
    """tcp-ka - uds-ka = 60, 130, 95, 40 µs: its own interval excludes 0 (p about 0.03),
    but not once the answer's four comparisons are judged together."""
    p50 = {k: v + [v[0]] for k, v in EIGHT.items()}
    p50["uds-ka"] = [0.54, 0.49, 0.515, 0.57]
    rep = build(p50_run(p50, rounds=4))
    d = rep["workloads"]["ping"]["breakdown"]["socket_bridge_pooled"]["figures"]["client_p50_ms"]
    assert d["p"] < 0.05 <= d["p_holm"] and not stats.measurable(d)
    assert ("is not told apart from TCP across the Docker bridge yet (`uds-ka` against `tcp-ka`: 95% CI 10 to 148 µs, "
            "4 rounds alone, neither excluding 0 nor inside ±2%, 12 µs): not sure yet") in rep["workloads"]["ping"]["answer"]
    assert "no measurable difference once the answer's comparisons are judged together (95% CI" in \
        markdown.render_markdown(rep)


def test_one_round_answer_gives_no_verdict():
    """ROUNDS=1: no interval, so neither a number called measurable nor "no
    measurable difference" (the old answer said "(500 to 500 µs over the rounds)")."""
    p50 = {k: v[:1] for k, v in EIGHT.items()}
    text = build(p50_run(p50, rounds=1))["workloads"]["ping"]["answer"]
    assert "no measurable difference" not in text and "over the rounds" not in text
    assert "differed by 250 µs against" in text and "in its 1 round: no interval, no verdict" in text


def test_answer_without_both_transports_says_so():
    rep = build(make_k6(paths=("tcp", "tcp-ka")))
    assert "no answer to give" in rep["workloads"]["ping"]["answer"]


def test_max_answer_is_throughput():
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p]))
    text = rep["workloads"]["ping"]["answer"]
    assert "uds carried 2.00x the requests/s of tcp" in text and "uds-ka carried 1.20x the requests/s of tcp-ka" in text
    # report.md: the answer as a table too, a row per comparison; rounds all equal give no interval, no verdict.
    md = markdown.render_markdown(rep)
    answer = md[md.index("## The answer"):md.index("## Machine")]
    assert "each path flat out (k6, 64 connections), requests/s:" in answer
    assert ("| new per request | TCP across the Docker bridge (`uds` vs `tcp`) | nginx | — | — | no verdict: 3 rounds, "
            "all equal, no interval |") in answer
    swing = iter([1.0, 1.03, 0.98] * 20)
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p] * next(swing)))
    answer = markdown.render_markdown(rep).split("## Machine")[0]
    assert re.search(r"\| new per request \| TCP across the Docker bridge \(`uds` vs `tcp`\) \| nginx \| [\d.]+x TCP's \| "
                     r"[\d.]+-[\d.]+x \| \*\*more requests/s: [\d.]+x TCP's\*\* \|", answer), answer


def test_max_mode_breaks_down_costs_not_queueing():
    """Flat out, client latency is the queue at the limit: the breakdown gives
    costs per request only, and says why."""
    rep = build(max_k6(lambda p: {"tcp": 8000, "uds": 16000, "tcp-ka": 25000, "uds-ka": 30000}[p]))
    term = rep["workloads"]["ping"]["breakdown"]["tcp_connect"]
    assert "client_p50_ms" not in term["figures"] and "app_cpu_us_per_req" in term["figures"]
    md = markdown.render_markdown(rep)
    assert "client p50 latency (µs)" not in md and "mostly its queue at the limit" in md


def test_breakdown_chart_draws_each_terms_mean_and_interval():
    wl = build(p50_run(EIGHT))["workloads"]["ping"]
    bars = {label: rest for label, *rest in charts.term_bars(wl, "client_p50_ms")}
    d = wl["breakdown"]["socket_new"]["figures"]["client_p50_ms"]
    assert bars[wl["breakdown"]["socket_new"]["label"]] == [d["mean"], d["lo"], d["hi"], True]
    # A negative difference stays negative; one that is not measurable is marked so.
    pooled = bars[wl["breakdown"]["socket_pooled"]["label"]]
    assert pooled[0] == pytest.approx(0) and pooled[3] is False
    assert len(bars) == len(wl["breakdown"])


def test_max_answer_says_when_holm_takes_a_ratio_back():
    """Two ratios whose intervals exclude 1 alone (p about 0.03 each) but not
    once judged together: the answer must not print "no measurable difference"
    beside an interval that excludes 1 without saying why."""
    ratios = [1.30, 1.05, 1.25, 1.02, 1.22]
    phases = [{"workload": "ping", "path": p, "round": r, "figures": {"rps": 1000.0 * (x if p.startswith("uds") else 1)}}
              for r, x in enumerate(ratios, 1) for p in ("tcp-lo", "uds-lo", "tcp-lo-ka", "uds-lo-ka")]
    text = words.max_answer("ping", phases, {"mode": "max", "generator": "wrk", "connections": 64})
    assert text.count("no measurable difference once the comparisons are judged together (95% CI 1.02-1.33x, 5 rounds alone)") == 2, text


# ---------------------------------------------------------------- pooling


def test_a_stack_that_closes_every_connection_is_not_credited_with_pooling():
    """gunicorn's sync workers close every connection (catalogue.json: pools
    false): its -ka paths opened one per request, and the answer says so
    instead of "with pooled keepalive connections" (issue 22)."""
    gunicorn = {"services": {**COMPOSE["services"],
                             "app": {**COMPOSE["services"]["app"], "image": "uds-lab/stack-gunicorn:local",
                                     "labels": {"uds-lab.stack": "gunicorn"}}}}
    rep = build(p50_run(EIGHT, rate=500), compose=gunicorn)
    text = rep["workloads"]["ping"]["answer"]
    assert rep["stack"] == "gunicorn"
    assert "pooled keepalive" not in text, text
    assert ("On the keepalive (-ka) paths, which did not reuse connections here (gunicorn closes every connection, "
            "as its stack.env says), the socket is not told apart from TCP over loopback yet") in text
    (w,) = [w for w in rep["warnings"] if w["kind"] == "not_pooled"]
    assert w["workload"] == "ping" and "not of pooling" in w["message"]
    assert "not_pooled" not in kinds(build(p50_run(EIGHT, rate=500)))  # the lab's own app pools
    # gunicorn's gthread workers keep connections (catalogue.json: pools_with).
    gunicorn["services"]["app"]["environment"] = {"GUNICORN_WORKER_CLASS": "gthread"}
    rep = build(p50_run(EIGHT, rate=500), compose=gunicorn)
    assert "With pooled keepalive connections" in rep["workloads"]["ping"]["answer"]


def test_pooled_paths_that_opened_a_connection_per_request_are_named_from_the_apps_accepts():
    """An app the catalogue does not know: its accept counter on the -ka
    paths (one per request, as on the new-connection paths) says it did not pool."""
    mine = {"services": {**COMPOSE["services"], "app": {**COMPOSE["services"]["app"], "image": "me/app:1"}}}
    k6 = p50_run(EIGHT, rate=500, duration=10)
    closes = server_table(k6, {"app_connections_accepted_total": 1000})  # 1000 requests a phase
    rep = build(k6, closes, mine)
    assert rep["stack"] is None
    assert rep["phases"][0]["figures"]["app_conns_per_req"] == pytest.approx(1.0)
    text = rep["workloads"]["ping"]["answer"]
    assert "the app accepted 1.00 new connections per request on tcp-lo-ka; the app accepted 1.00 new connections " \
           "per request on uds-lo-ka" in text and "pooled keepalive" not in text
    # Pooling: a few connections over a phase's 1000 requests.
    pooling = server_table(k6, {"app_connections_accepted_total": by_phase(k6, lambda p, r: 3 if "-ka" in p else 1000)})
    rep = build(k6, pooling, mine)
    assert "With pooled keepalive connections, the socket" in rep["workloads"]["ping"]["answer"]
    assert "not_pooled" not in kinds(rep)
    # Flat out, the ratios of the -ka pairs are said to be of new connections.
    rep = build(max_k6(lambda p: 1000.0, duration=10), closes, mine)
    assert "which did not reuse connections here" in rep["workloads"]["ping"]["answer"]


def test_the_socket_costing_more_is_said_as_a_cost():
    """A negative saving (the socket slower) is judged as a positive one and worded as a cost."""
    p50 = {**EIGHT, "uds-lo": [0.85, 0.905, 0.87]}  # 50, 55, 50 µs slower than tcp-lo
    text = build(p50_run(p50))["workloads"]["ping"]["answer"]
    assert "the socket cost 52 µs (6% of tcp-lo's median) against TCP over loopback" in text


def test_a_pooled_socket_measurably_slower_points_to_what_the_test_bed_found():
    """The answer's pooled pair with the socket slower, by a clear margin in
    every round: the answer says what was behind it on the test bed, labelled
    as the test bed's, and where this run's switches are; not otherwise."""
    slower = {**EIGHT, "tcp-lo-ka": [0.46, 0.45, 0.47], "uds-lo-ka": [0.56, 0.555, 0.57]}
    text = build(p50_run(slower, rate=500))["workloads"]["ping"]["answer"]
    assert "the socket cost 102 µs" in text and "Where the pooled socket is slower at a fixed rate: on the test bed" in text
    assert "Where the pooled socket" not in build(p50_run(EIGHT, rate=500))["workloads"]["ping"]["answer"]


# ---------------------------------------------------------------- precision, pairing, the direct paths


def test_the_precision_line_says_met_not_met_or_nothing_to_narrow():
    from report.markdown_answer import precision_line
    c = [{"workload": "ping", "term": "socket_new", "pair": "uds-lo against tcp-lo", "rounds": 20, "half_width": 0.031},
         {"workload": "ping", "term": "socket_pooled", "pair": "uds-lo-ka against tcp-lo-ka", "rounds": 20,
          "half_width": 0.072}]
    p = {"target_pct": 5.0, "met": False, "rounds": 20, "max_rounds": 20, "comparisons": c}
    assert precision_line(p) == ("Precision: **not met**: the target was +/-5%; after 20 rounds (MAX_ROUNDS) the widest "
                                 "comparison is +/-7.2% (uds-lo-ka against tcp-lo-ka, `ping`). More rounds, or a "
                                 "quieter machine, narrow it.")
    assert precision_line({**p, "met": True, "comparisons": c[:1], "max_rounds": 48}) == (
        "Precision: every comparison of the answer reached +/-5% of its first path's figure after 20 rounds "
        "(PRECISION; at most 48).")
    assert "no comparison of the answer to narrow" in precision_line({**p, "comparisons": []})
    assert precision_line(None) is None


def test_a_precision_runs_answer_takes_its_spread_from_the_first_stage():
    """PRECISION: the first 3 rounds set how many the run took; the answer's
    intervals are Stein's (their spread), and the report says so."""
    p50 = {k: v + v for k, v in EIGHT.items()}  # 6 rounds: the first stage's 3, then 3 more
    k6 = p50_run(p50, rounds=6)
    k6["precision"] = {"target_pct": 5.0, "met": True, "rounds": 6, "max_rounds": 12, "first_stage_rounds": 3,
                       "comparisons": [{"workload": "ping", "term": "socket_new", "pair": "uds-lo against tcp-lo",
                                        "rounds": 6, "half_width": 0.04}]}
    rep = build(k6)
    d = rep["workloads"]["ping"]["breakdown"]["socket_new"]["figures"]["client_p50_ms"]
    assert d["first_stage"] == 3 and "Stein" in d["method"]
    assert "Stein's two-stage procedure: the first 3 rounds' spread set how many" in markdown.render_markdown(rep)


def test_comparisons_whose_rounds_were_not_back_to_back_are_named():
    """plan.py runs the answer's pairs back to back, each path once a round:
    a term across two pairs (a connection's setup, tcp against tcp-ka) pairs
    phases up to a round apart, and the report says which."""
    rep = build(make_k6(rounds=4, paired=True))
    wl = rep["workloads"]["ping"]
    by_paths = {(t["minuend"], t["subtrahend"]): t for t in wl["breakdown"].values()}
    assert by_paths[("tcp", "uds")]["back_to_back"] is True
    assert by_paths[("tcp", "tcp-ka")]["back_to_back"] is False
    assert wl["back_to_back_with_tcp"] == ["uds"]
    md = markdown.render_markdown(rep)
    assert "Back to back with tcp in every round: `uds`; every other path's round pairs with tcp's further apart" in md
    named = next(line for line in md.splitlines() if line.startswith("Back to back in every round: the answer's pairs"))
    assert by_paths[("tcp", "tcp-ka")]["label"] in named and by_paths[("tcp", "uds")]["label"] not in named


def test_straight_to_the_app_is_set_beside_the_same_pair_through_nginx():
    """make max GENERATOR=oha with the direct paths: the socket's ratio
    straight to the app, the same pair through nginx-lo, the share of the
    direct gain that survives nginx, seed 000's figure beside them."""
    rps = {"direct-tcp": 10000, "direct-uds": 20000, "tcp-lo-ka": 6000, "uds-lo-ka": 7500, "tcp-lo": 3000,
           "uds-lo": 4500}
    k6 = max_k6(lambda p: rps[p], paths=tuple(rps))
    for ph in k6["phases"]:  # a little spread over rounds on the socket paths, so that intervals exist
        if ph["path"] in ("direct-uds", "uds-lo-ka", "uds-lo"):
            ph["requests"] = int(ph["requests"] * (1 + 0.01 * ph["round"]))
    k6["settings"]["generator"] = "oha"
    rep = build(k6)
    d = rep["direct"]["ping"]
    assert d["ratio"]["mean"] == pytest.approx(2.0, rel=0.02)
    pooled = next(b for b in d["beside"] if b["term"] == "socket_pooled")
    assert pooled["ratio"]["mean"] == pytest.approx(1.25, rel=0.02) and pooled["survives"] == pytest.approx(0.25, abs=0.03)
    direct_phase = next(p for p in rep["phases"] if p["path"] == "direct-uds")
    assert direct_phase["missing"]["nginx_connect_ms"] == queries.NO_NGINX  # said in its cell, not warned
    assert not [w for w in rep["warnings"] if queries.NO_NGINX in w["message"]]
    md = markdown.render_markdown(rep)
    assert "## Straight to the app" in md
    assert "- `ping`: straight to the app, `direct-uds` carried 2.0" in md and "the requests/s of `direct-tcp`" in md
    assert "pooled (`uds-lo-ka` against `tcp-lo-ka`) 1.2" in md and "of the direct gain survives" in md
    assert "seed 000 (Gin, wrk, no nginx, its own machine): 3.0x" in md
    assert "Straight to the app" not in markdown.render_markdown(build(max_k6(lambda p: 1000.0 * (2 if "uds" in p else 1))))
    same = {**rps, "direct-uds": 10000}  # no difference straight to the app: said so, not "carried"
    k6 = max_k6(lambda p: same[p], paths=tuple(same))
    for ph in k6["phases"]:
        if ph["path"] in ("direct-uds", "uds-lo-ka", "uds-lo"):
            ph["requests"] = int(ph["requests"] * (1 + (0.02 if ph["round"] % 2 else -0.02)))
    k6["settings"]["generator"] = "oha"
    assert "straight to the app, `direct-uds` against `direct-tcp`: no measurable difference (95% CI" in \
        markdown.render_markdown(build(k6))
