"""make sweep's judge and report (report/sweep.py): a step held or failed at
the boundaries of its rule, a path leaving after its failures, the steps
merged, the knee, the savings per rate and the chart."""
import json
import re

import numpy as np
import pytest

from report import cli, sweep, sweep_render
from report.testkit import fake_query, free_port


def phase(path, step, rate, r, rps=None, failed=0.0, p50=1.0, p99=3.0, statuses=None):
    n = int(round((rate if rps is None else rps) * 5))
    return {"name": f"ping__{path}__s{step}__r{r}", "workload": "ping", "path": path, "round": r, "phase": "measure",
            "endpoint": "/ping", "start_offset_s": 0, "duration_s": 5, "requests": n, "failed_rate": failed,
            "dropped_iterations": 0, "step": step, "rate": rate,
            "duration_ms": {"avg": p50, "p50": p50, "p90": p50 * 1.5, "p95": p50 * 2, "p99": p99, "p999": p99 * 2,
                            "max": p99 * 3},
            "statuses": statuses or {"502": 0, "503": 0, "504": 0, "0": 0}}


def load(phases, rates=(100, 200, 400, 800)):
    return {"testid": "sw", "urls": {}, "start_ms": 1_763_820_000_000, "gap_s": 1, "idle": None,
            "settings": {"mode": "sweep", "generator": "k6", "workloads": ["ping"], "paths": ["tcp-lo", "uds-lo"],
                         "rate": rates[0], "rates": list(rates), "step": 1, "stop_after_failures": 2,
                         "connections": 64, "duration": 5, "rounds": 3, "warmup": 0, "cpu_iterations": 1,
                         "sleep_ms": 1, "endpoint": "/ping", "seed": 1},
            "phases": phases, "totals": {"requests": sum(p["requests"] for p in phases), "failed_rate": 0},
            "thresholds_failed": []}


@pytest.mark.parametrize("failed, rps, verdict, borderline", [
    (0.01, (100,) * 3, None, None),  # exactly 1% failed: held
    # 1.01% of 1,500 requests: past 1%, but its interval is not: held, said to be near.
    (0.0101, (100,) * 3, None, "1.0% of requests failed, its 95% interval reaching 0.5"),
    (0.02, (100,) * 3, "2.0% of requests failed", None),  # 30 of 1,500: the interval clears 1%
    (0.0, (95,) * 3, None, None),  # exactly 95% of the rate: held
    # Below 95% in every round alike: no interval, so a threshold on the figure, said so.
    (0.0, (94.8,) * 3, "held 95 of 100 req/s (one run's figure against the threshold: no interval over rounds)", None),
    (0.0, (93, 94, 95.5), None, "held 94 of 100 req/s, its 95% interval reaching 97"),
    (0.0, (90, 91, 92), "held 91 of 100 req/s", None),
])
def test_a_step_is_held_or_failed_on_intervals_at_the_rules_boundaries(failed, rps, verdict, borderline):
    out = sweep.step_outcome([phase("uds-lo", 1, 100, r, rps=v, failed=failed) for r, v in enumerate(rps, 1)], 100)
    assert out["uds-lo"]["failed"] == verdict
    assert (out["uds-lo"]["borderline"] or "").startswith(borderline or "")
    assert bool(out["uds-lo"]["borderline"]) == bool(borderline)


def test_a_path_leaves_after_its_second_failed_step_not_its_first():
    ph = [phase(p, 1, 100, r) for p in ("tcp-lo", "uds-lo") for r in (1, 2, 3)]
    ph += [phase("tcp-lo", 2, 200, r, rps=150) for r in (1, 2, 3)] + [phase("uds-lo", 2, 200, r) for r in (1, 2, 3)]
    lines, nxt, going = sweep.decide(load(ph))
    assert (nxt, going) == (3, ["tcp-lo", "uds-lo"])  # tcp-lo failed once: it goes on
    assert "  tcp-lo: 150 req/s, p99 3.00 ms: failed: held 150 of 200 req/s (one run's figure against the threshold: " \
        "no interval over rounds)" in lines
    ph += [phase("tcp-lo", 3, 400, r, failed=0.5) for r in (1, 2, 3)] + [phase("uds-lo", 3, 400, r) for r in (1, 2, 3)]
    lines, nxt, going = sweep.decide(load(ph))
    assert (nxt, going) == (4, ["uds-lo"]) and "  leaving the sweep (failed 2 steps): tcp-lo" in lines
    ph += [phase("uds-lo", 4, 800, r) for r in (1, 2, 3)]
    assert sweep.decide(load(ph))[1] is None  # the last rate: done


def test_check_merges_each_step_into_load_json(tmp_path):
    run = tmp_path / "sw"
    run.mkdir()
    (run / "load.json").write_text(json.dumps(load([phase("uds-lo", 1, 100, r) for r in (1, 2)])))
    more = load([phase("uds-lo", 2, 200, r) for r in (1, 2)])
    more["start_ms"] += 30_000
    (run / "load-s2.json").write_text(json.dumps(more))
    (run / "plan-s2.json").write_text("{}")
    _, nxt = sweep.check(run)
    assert nxt == {"SWEEP_STEP": 3, "PATHS": "uds-lo"} and sorted(p.name for p in run.iterdir()) == ["load.json"]
    merged = json.loads((run / "load.json").read_text())
    assert [(p["step"], p["start_offset_s"]) for p in merged["phases"]] == [(1, 0), (1, 0), (2, 30), (2, 30)]
    assert merged["settings"]["rounds"] == 3  # a step's rounds are not added to the run's


def sweep_run():
    """tcp-lo's p99 climbs past 10x its p99 at 100 req/s at 800, where it also fails on 502s;
    uds-lo holds every step, 100 µs faster at the median."""
    ph = []
    for step, rate in enumerate((100, 200, 400, 800), 1):
        for r in (1, 2, 3):
            jitter = 0.01 * r
            tcp_p99 = {100: 2.0, 200: 3.0, 400: 12.0, 800: 60.0}[rate]
            ph.append(phase("tcp-lo", step, rate, r, p50=0.5 + jitter, p99=tcp_p99,
                            failed=0.2 if rate == 800 else 0.0,
                            statuses={"502": 800 if rate == 800 else 0, "503": 0, "504": 0, "0": 0}))
            ph.append(phase("uds-lo", step, rate, r, p50=0.4 + jitter * 1.1, p99=2.0))
    return load(ph)


def test_the_report_gives_the_saving_at_each_rate_each_knee_and_how_a_path_failed(tmp_path):
    rep = sweep.build(sweep_run())
    assert rep["knees"]["tcp-lo"]["rate"] == 400 and rep["knees"]["uds-lo"]["rate"] == 800
    assert rep["knees"]["tcp-lo"]["failed_at"][:2] == (800, "20.0% of requests failed")
    md = sweep_render.render(rep)
    assert "- **100 req/s**: `uds-lo` against `tcp-lo` (a new connection per request) saved 98 µs" in md
    assert ("- `tcp-lo`: held up to 400 req/s with its p99 within 10x its p99 at the lowest rate (2.00 ms, 95% CI 1.72 to "
            "2.51, of its 1,500 requests there); its p99 passed that bound at 800 req/s (60.00 ms); first failed at "
            "800 req/s: 20.0% of requests failed (2,400 502 (nginx could not reach the app))") in md
    assert "| 800 | tcp-lo | 800 (no spread) | 0.52 (0.50 to 0.54) |" in md and "failed: 20.0% of requests failed |" in md
    # Knees are point estimates on the steps, labelled so, and never set against each other.
    knees = md.split("## Where each path bends and breaks")[1].split("## Every step")[0]
    assert "Each knee is a point estimate on this sweep's steps, not a comparison" in knees
    assert not re.search(r"(higher|lower|later|earlier) than `", knees)


def test_a_sweep_without_a_same_nginx_pair_says_so():
    rep = sweep.build(load([phase("uds-lo", 1, 100, r) for r in (1, 2)]))
    assert "no answer to give" in sweep_render.render(rep)


def test_make_report_on_a_sweep_writes_its_report_and_chart(tmp_path):
    """Server figures per phase, as make load's: the app's CPU per request over
    a step's rounds; k6 at 95% of its CPU limit makes the step k6's."""
    run = tmp_path / "sw"
    run.mkdir()
    (run / "load.json").write_text(json.dumps(sweep_run()))
    (run / "compose.json").write_text(json.dumps({"services": {"k6": {"cpus": 1}, "app": {}, "nginx": {}}}))
    busy = {("container_cpu_usage_seconds_total", 'service="k6"'): 0.95, "app_http_requests_total": 1000,
            "app_process_cpu_seconds_total": 0.05}
    rep = cli.run("sw", "http://127.0.0.1:1", tmp_path, query=fake_query(busy))
    assert all(set(w) >= {"kind", "message"} for w in rep["warnings"])
    assert rep["mode"] == "sweep" and (run / "report.md").is_file()
    o = rep["steps"]["1"]["uds-lo"]
    assert o["app_cpu_us_per_req"]["mean"] == pytest.approx(50) and o["generator"] == "k6 used 0.95 of its 1 CPUs"
    assert rep["knees"]["uds-lo"]["rate"] is None  # no step of the path's own
    assert "the generator's limit, not the path's: k6 used 0.95 of its 1 CPUs" in (run / "report.md").read_text()
    (chart,) = rep["charts"]
    assert (run / chart["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sweeps_backlog_is_the_one_the_app_had_when_it_began(tmp_path):
    """make sweep SWEEP=envelope restarts the app at APP_SOMAXCONN (16): the
    report read the hour's largest backlog (the lab's usual 4,096), not the
    one the sweep ran at."""
    run = tmp_path / "sw"
    run.mkdir()
    (run / "load.json").write_text(json.dumps(sweep_run()))
    backlog = lambda expr: 16 if "last_over_time(app_listen_backlog" in expr else 4096  # noqa: E731
    rep = cli.run("sw", "http://127.0.0.1:1", tmp_path, query=fake_query({"app_listen_backlog": backlog}))
    assert rep["backlog"].startswith("16 on both listeners"), rep["backlog"]


def test_a_sweep_is_reported_from_k6_alone_when_prometheus_does_not_answer(tmp_path):
    run = tmp_path / "sw"
    run.mkdir()
    (run / "load.json").write_text(json.dumps(sweep_run()))
    rep = cli.run("sw", f"http://127.0.0.1:{free_port()}", tmp_path)
    assert "does not answer" in rep["server_missing"] and rep["knees"]["tcp-lo"]["rate"] == 400
    assert "Server figures: n/a (Prometheus at" in (run / "report.md").read_text()


def connections_run():
    """SWEEP=connections with wrk: uds-lo carries 1.5x tcp-lo's requests/s at
    every level; at 1024 connections the socket's backlog overflows: 502s."""
    ph = []
    for step, conns in enumerate((64, 256, 1024), 1):
        for r in (1, 2, 3):
            tcp = 4000 + 100 * r
            for path, v in (("tcp-lo", tcp), ("uds-lo", 1.5 * tcp + 40 * r)):
                p = phase(path, step, 1, r, rps=v, p99=5.0 * step,
                          failed=0.05 if (path == "uds-lo" and conns == 1024) else 0.0,
                          statuses={"non_2xx_3xx": 1500 if (path == "uds-lo" and conns == 1024) else 0,
                                    "connect": 0, "read": 0, "write": 0, "timeout": 0})
                del p["rate"]
                p["connections"] = conns
                ph.append(p)
    doc = load(ph, rates=(64, 256, 1024))
    doc["settings"].update({"sweep": "connections", "generator": "wrk", "connections": 64})
    del doc["settings"]["rate"]
    return doc


def test_a_flat_out_step_gives_no_ratio_for_a_path_that_failed_its_requests():
    """At 1,024 connections uds-lo failed 5% of its requests: as make load's
    and make max's answer, its pair gets no verdict there (share, statuses,
    likely cause) and no ratio, and leaves Holm's family (3 pairs, 2 compared)."""
    rep = sweep.build(connections_run())
    md = sweep_render.render(rep)
    step = next(line for line in md.splitlines() if line.startswith("- **1,024 connections**"))
    assert step.startswith("- **1,024 connections**: **no verdict** against TCP over loopback (`uds-lo` against "
                           "`tcp-lo`): `uds-lo` failed 5% of its requests (non_2xx_3xx: 4,500)")
    assert "carried" not in step and "x the requests/s" not in step
    assert "Holm's correction over the 2 compared" in md
    assert "p_holm" not in rep["savings"]["3"][0]["ratio"]


def test_a_sweep_of_connections_gives_ratios_peaks_and_where_the_socket_failed(tmp_path):
    rep = sweep.build(connections_run(), backlog="4096 (somaxconn in the app's network namespace)")
    assert rep["peaks"]["uds-lo"]["failed_at"][:2] == (1024, "5.0% of requests failed")
    assert rep["peaks"]["tcp-lo"]["failed_at"] is None and rep["peaks"]["tcp-lo"]["connections"] in (64, 256, 1024)
    md = sweep_render.render(rep)
    assert "- **64 connections**: `uds-lo` carried 1.52x the requests/s of `tcp-lo` (a new connection per request; " \
           "95% CI 1.50-1.54x, 3 rounds)" in md
    assert "first failed at 1,024 connections: 5.0% of requests failed (4,500 non_2xx_3xx)" in md
    assert "The app's listen backlog: 4096 (somaxconn in the app's network namespace)." in md
    assert "| 1,024 | uds-lo |" in md and "NGINX_MAX_IN_FLIGHT" in md
    (chart,) = sweep_render.write_chart(rep, tmp_path)
    assert (tmp_path / chart["file"]).read_bytes()[:4] == b"\x89PNG"
    assert "RATE: this sweep stepped connections" in sweep_render.render(rep, rate=300)


def test_make_report_rate_names_the_nearest_step():
    rep = sweep.build(sweep_run())
    md = sweep_render.render(rep, rate=330)
    assert "At your rate (330 req/s) the nearest measured step is 400 req/s: `uds-lo` against `tcp-lo` (a new " \
           "connection per request) saved" in md


def test_a_bad_rate_is_named_in_one_line(capsys):
    assert cli.main(["--run", "sw", "--rate", "abc"]) == 2
    assert capsys.readouterr().err.strip() == 'report: RATE="abc": must be a whole number >= 1 (req/s)'


def test_make_report_prints_a_sweeps_warnings(tmp_path, capsys):
    """make report's command line on a sweep run: it writes the report and
    names each warning (it failed on the sweep's warnings once)."""
    run = tmp_path / "sw"
    run.mkdir()
    ph = [phase(p, 1, 100, r, rps=80) for p in ("tcp-lo", "uds-lo") for r in (1, 2)]
    (run / "load.json").write_text(json.dumps(load(ph)))
    assert cli.main(["--run", "sw", "--results", str(tmp_path), "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 0
    assert "warning: all_short: at 100 req/s every path fell short" in capsys.readouterr().out


def test_a_step_past_a_paths_limit_compares_no_latency():
    """At a rate a path did not hold, its latency is a queue (the path's or
    k6's): the answer compares nothing there and says why."""
    ph = [phase(p, 1, 100, r, p50=0.5 + 0.01 * r + (0.1 + 0.001 * r if p == "tcp-lo" else 0)) for p in ("tcp-lo", "uds-lo")
          for r in (1, 2, 3)]
    ph += [phase("tcp-lo", 2, 200, r, rps=150, p50=40 + r) for r in (1, 2, 3)]
    ph += [phase("uds-lo", 2, 200, r, p50=1 + 0.01 * r) for r in (1, 2, 3)]
    md = sweep_render.render(sweep.build(load(ph)))
    assert "- **100 req/s**: `uds-lo` against `tcp-lo` (a new connection per request) saved 102 µs" in md
    assert ("- **200 req/s**: `uds-lo` against `tcp-lo` (a new connection per request): not compared, tcp-lo past "
            "its limit at this rate (latency is the queue there).") in md


def test_the_knee_is_the_last_step_before_the_first_past_the_bound():
    """tcp-lo's p99 passes 10x its lowest-rate p99 at 200 req/s and comes back
    under it at 400 and 800: its knee is 100, not 800 (monotone)."""
    p99 = {100: 2.0, 200: 30.0, 400: 3.0, 800: 3.0}
    ph = [phase(p, s, rate, r, p99=p99[rate] if p == "tcp-lo" else 2.0)
          for s, rate in enumerate(p99, 1) for p in ("tcp-lo", "uds-lo") for r in (1, 2, 3)]
    k = sweep.build(load(ph))["knees"]
    assert k["tcp-lo"]["rate"] == 100 and k["tcp-lo"]["p99_passed_at"][0] == 200
    assert k["uds-lo"]["rate"] == 800 and k["uds-lo"]["p99_passed_at"] is None


def test_a_flat_median_with_its_tail_past_the_bound_is_the_knee():
    """The median stays at 1 ms at every rate while the p99 goes from 2 to
    40 ms at 400 req/s: the knee is judged on the tail, so it is 200."""
    p99 = {100: 2.0, 200: 4.0, 400: 40.0, 800: 60.0}
    ph = [phase("uds-lo", s, rate, r, p50=1.0, p99=p99[rate]) for s, rate in enumerate(p99, 1) for r in (1, 2, 3)]
    k = sweep.build(load(ph))["knees"]["uds-lo"]
    assert k["rate"] == 200 and k["p99_passed_at"] == (400, pytest.approx(40.0))


def test_the_base_p99_is_of_the_lowest_steps_requests_pooled():
    """Three phases of real-looking requests (lognormal, one phase with a
    heavier tail, as one phase in three has on the VM): the p99 of all their
    requests pooled, read from the phases' quantiles, holds the true pooled
    p99 in its interval, where the mean of the phases' p99s, the old base,
    lies outside it."""
    rng = np.random.default_rng(5)
    phases, reqs = [], []
    for sigma in (0.3, 0.3, 0.9):
        x = rng.lognormal(0, sigma, 2500)
        reqs.append(x)
        phases.append({"requests": len(x), "duration_ms": {k: float(np.quantile(x, share)) for k, share in sweep.QUANTILES}})
    truth = float(np.quantile(np.concatenate(reqs), 0.99))
    got = sweep.pooled_quantile(phases)
    assert got["requests"] == 7500 and got["lo"] <= truth <= got["hi"]
    old = sum(p["duration_ms"]["p99"] for p in phases) / 3
    assert not got["lo"] <= old <= got["hi"]


def test_every_steps_savings_are_judged_together():
    """Holm over every step's compared pairs, not within a step: a saving
    whose own interval excludes 0 at one of four steps is not called
    measurable once the four steps are judged together."""
    ph = []
    for s, rate in enumerate((100, 200, 400, 800), 1):
        rounds = ((0.50, 0.438), (0.52, 0.438), (0.51, 0.458)) if s == 1 else ((0.50, 0.48), (0.52, 0.53), (0.51, 0.51))
        for r, (t, u) in enumerate(rounds, 1):
            ph += [phase("tcp-lo", s, rate, r, p50=t), phase("uds-lo", s, rate, r, p50=u + 0.002 * s)]
    rep = sweep.build(load(ph))
    (x,) = rep["savings"]["1"]
    assert x["diff_us"]["p"] < 0.05 <= x["diff_us"]["p_holm"]
    assert "no measurable difference once the pairs are judged together" in sweep_render.render(rep)


def stream(step, rate, tcp_ms, uds_ms, blocks=30, held=1.0, seed=0):
    """A step's interleaved stream: both paths' medians per 1 s block, with a
    swing every path shares (the machine's) and a little noise of each's own."""
    rng = np.random.default_rng(seed)
    swing = rng.normal(0, 0.05, blocks)
    per_block = int(rate * held / 2)
    by_path = {p: {"requests": per_block * blocks, "failed_rate": 0.0, "duration_ms": {"p50": ms, "p99": ms * 3},
                   "blocks": [{"requests": per_block, "p50": ms + s + rng.normal(0, 0.005)} for s in swing]}
               for p, ms in (("tcp-lo", tcp_ms), ("uds-lo", uds_ms))}
    return {"name": f"ping__mix__s{step}__r1", "workload": "ping", "path": "mix", "round": 1, "phase": "measure",
            "endpoint": "/ping", "start_offset_s": 0, "duration_s": blocks, "requests": per_block * 2 * blocks,
            "failed_rate": 0.0, "dropped_iterations": 0, "step": step, "rate": rate, "paths": ["tcp-lo", "uds-lo"],
            "block_s": 1, "by_path": by_path}


def test_a_steps_savings_come_from_its_interleaved_stream_second_by_second():
    """The rounds say nothing here (equal medians); the stream, paired second by
    second, sees 40 µs through the machine's swings; a stream that did not hold
    its rate compares nothing, and no path's knee counts the stream."""
    ph = [phase(p, s, r, n) for s, r in ((1, 100), (2, 200)) for p in ("tcp-lo", "uds-lo") for n in (1, 2, 3)]
    ph += [stream(1, 100, 0.54, 0.50, seed=1), stream(2, 200, 0.64, 0.60, held=0.8, seed=2)]
    rep = sweep.build(load(ph, rates=(100, 200)))
    (lo,) = [x for x in rep["savings"]["1"] if x["pair"] == ["tcp-lo", "uds-lo"]]
    d = lo["diff_us"]
    assert d["blocks"] == 30 and d["lo"] > 0 and abs(d["mean"] - 40) < 10 and lo["past_limit"] == []
    (lo2,) = [x for x in rep["savings"]["2"] if x["pair"] == ["tcp-lo", "uds-lo"]]
    assert lo2["past_limit"] == ["the interleaved stream"]
    assert set(rep["knees"]) == {"tcp-lo", "uds-lo"} and all("mix" not in o for o in rep["steps"].values())
    md = sweep_render.render(rep)
    assert "`uds-lo` against `tcp-lo` (a new connection per request) saved 40 µs" in md
    assert "paired second by second in each step's interleaved stream" in md and "30 blocks of 1 s" in md
    assert "the interleaved stream past its limit" in md


def test_a_sweep_names_the_generator_that_ran_it():
    """An oha sweep's warnings and method name oha, not k6."""
    ph = [phase(p, 1, 100, r, rps=80) for p in ("tcp-lo", "uds-lo") for r in (1, 2)]
    run = load(ph)
    run["settings"]["generator"] = "oha"
    rep = sweep.build(run)
    (w,) = rep["warnings"]
    assert "oha's own ceiling" in w["message"] and "k6" not in w["message"]
    md = sweep_render.render(rep)
    assert "fixed arrival rate (oha's" in md and "k6" not in md


def test_pairs_past_their_limit_are_left_out_of_holms_family():
    """At 200 req/s tcp-lo did not hold the rate: that step's pair is not
    compared, so the family is the 100 req/s pair alone, whose p Holm leaves
    as it is (with the other in the family, it would double or more)."""
    ph = [phase(p, 1, 100, r, p50=0.5 + 0.01 * r + (0.1 + 0.003 * r if p == "tcp-lo" else 0))
          for p in ("tcp-lo", "uds-lo") for r in (1, 2, 3)]
    ph += [phase("tcp-lo", 2, 200, r, rps=150, p50=40 + r) for r in (1, 2, 3)]
    ph += [phase("uds-lo", 2, 200, r, p50=1 + 0.01 * r) for r in (1, 2, 3)]
    rep = sweep.build(load(ph, rates=(100, 200)))
    (held,), (past,) = rep["savings"]["1"], rep["savings"]["2"]
    assert past["past_limit"] == ["tcp-lo"] and past["diff_us"]["p"] < 0.05 and "p_holm" not in past["diff_us"]
    assert held["past_limit"] == [] and held["diff_us"]["p_holm"] == held["diff_us"]["p"]
    assert "Holm's correction over the 1 compared" in sweep_render.render(rep)


def test_a_steps_warm_up_is_not_its_figure():
    """A step's warm-up (round 0) held half the rate: the step is judged on its measured rounds alone."""
    ph = [phase("uds-lo", 1, 100, r) for r in (1, 2, 3)] + [phase("uds-lo", 1, 100, 0, rps=50, failed=0.5)]
    (o,) = sweep.steps(load(ph)).values()
    assert o["uds-lo"]["failed"] is None and o["uds-lo"]["achieved"]["rounds"] == 3
    assert o["uds-lo"]["error_share"] == 0 and o["uds-lo"]["achieved"]["mean"] == 100


def test_a_stream_that_sent_exactly_95_percent_held_its_rate():
    s = {"rate": 10, "duration_s": 10, "by_path": {"tcp-lo": {"requests": 48}, "uds-lo": {"requests": 47}}}
    assert sweep.stream_held(s)  # 95 of 100
    s["by_path"]["uds-lo"]["requests"] = 46
    assert not sweep.stream_held(s)


def test_a_p99_exactly_at_the_bound_has_not_passed_it():
    """The knee's bound is KNEE_FACTOR (10) times the lowest step's p99: at it, still held."""
    def o(rate, p99):
        return {"uds-lo": {"rate": rate, "pooled_p99": {"value": p99}, "failed": None, "generator": None, "statuses": {}}}
    k = sweep.knee("uds-lo", {1: o(100, 2.0), 2: o(200, 20.0), 3: o(400, 20.5)})
    assert k["rate"] == 200 and k["p99_passed_at"] == (400, 20.5)
