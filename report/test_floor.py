"""The floor's report (report/floor.py) from a floor.json of known figures:
the comparisons the catalogue names, their direction and intervals, the
per-transport table, and the floor set beside a run of the paths."""
import json

import numpy as np

from report import floor
from report.breakdown import breakdown


def floor_doc(rounds=6, uds=10.0, loopback=15.0, bridge=24.0, seed=1, sizes=(100, 102400)):
    """A floor.json: round trips of each size and new connections per
    transport, each round's figures swung together (paired) plus noise."""
    rng = np.random.default_rng(seed)
    base = {"uds": uds, "loopback": loopback, "bridge": bridge}
    phases = []
    for r in range(0, rounds + 1):
        swing = 1 + rng.uniform(-0.15, 0.15)
        for t, us in base.items():
            for size in sizes:
                v = us * (1 + size / 50000) * swing * (1 + rng.normal(0, 0.01))
                phases.append({"name": f"floor__{t}__rtt-{size}__r{r}", "transport": t, "measure": "rtt", "size": size,
                               "round": r, "phase": "warmup" if r == 0 else "measure", "duration_s": 1,
                               "address": "tcp:x:1", "start_offset_s": 0, "seconds": 1, "ops": 1000, "errors": 0,
                               "ops_per_s": 1e6 / v, "p50_us": v, "p99_us": 2 * v, "mean_us": v})
            c = 3 * us * swing * (1 + rng.normal(0, 0.01))
            phases.append({"name": f"floor__{t}__connect__r{r}", "transport": t, "measure": "connect", "size": 1,
                           "round": r, "phase": "warmup" if r == 0 else "measure", "duration_s": 1, "max_ops": 1000,
                           "address": "tcp:x:1", "start_offset_s": 0, "seconds": 0.5, "ops": 1000, "errors": 1,
                           "ops_per_s": 2000, "p50_us": c, "p99_us": 2 * c, "mean_us": c})
    return {"testid": "f1", "start_ms": 5, "phases": phases,
            "settings": {"mode": "floor", "transports": list(base), "sizes": list(sizes), "duration": 1,
                         "rounds": rounds, "warmup": 1, "seed": 3, "connects": 1000}}


def test_comparisons_follow_the_catalogue_and_find_a_true_ratio():
    rep = floor.build(floor_doc())
    got = {(x["key"], x["measure"]): x for x in rep["comparisons"]}
    assert sorted(got) == [("bridge", m) for m in ("connect", "rtt-100", "rtt-102400")] + \
        [("socket", m) for m in ("connect", "rtt-100", "rtt-102400")]
    s = got[("socket", "rtt-100")]
    assert (s["first"], s["second"]) == ("loopback", "uds")
    # loopback 15 µs against uds 10: 1.5x, inside the interval, measurable after Holm.
    assert s["ratio"]["lo"] < 1.5 < s["ratio"]["hi"] and s["ratio"]["p_holm"] < 0.05
    assert abs(got[("bridge", "connect")]["ratio"]["mean"] - 1.6) < 0.05  # 72 / 45


def test_warm_up_is_left_out_and_the_table_has_every_transport_and_measure():
    doc = floor_doc(rounds=3)
    doc["phases"][0]["p50_us"] = 1e9  # a warm-up phase (round 0) that must not count
    rep = floor.build(doc)
    assert set(rep["summary"]) == {"uds", "loopback", "bridge"}
    assert set(rep["summary"]["uds"]) == {"rtt-100", "rtt-102400", "connect"}
    assert rep["summary"]["uds"]["rtt-100"]["p50"] < 20 and rep["summary"]["uds"]["connect"]["errors"] == 3
    md = floor.render(rep)
    assert md.startswith("# uds-lab floor: run `f1`")
    assert "**The socket against TCP over loopback**: a 100 B round trip on one connection took" in md
    assert "| bridge | connect |" in md and "3 rounds of 1 s per measure" in md


def test_no_difference_is_said_so_and_one_round_gives_no_verdict():
    same = floor.build(floor_doc(uds=15.0, loopback=15.0, seed=4))
    s = next(x for x in same["comparisons"] if (x["key"], x["measure"]) == ("socket", "rtt-100"))
    assert "no measurable difference" in floor.sentence(s)
    # An interval that excludes 1 alone but not once Holm's correction judges the run's six together.
    x = {**s, "ratio": {**s["ratio"], "lo": 1.01, "hi": 1.2, "mean": 1.1, "p": 0.04, "p_holm": 0.2, "rounds": 4}}
    assert "no measurable difference once the run's comparisons are judged together (95% CI 1.01-1.20x, 4 rounds alone)" \
        in floor.sentence(x)
    faster = floor.build(floor_doc(uds=15.0, loopback=10.0))
    s = next(x for x in faster["comparisons"] if (x["key"], x["measure"]) == ("socket", "rtt-100"))
    assert "loopback's is 0.67x" in floor.sentence(s) and " µs less (95% CI -" in floor.sentence(s)
    one = floor.build(floor_doc(rounds=1))
    assert "1 round, no interval, no verdict" in floor.sentence(one["comparisons"][0])


def test_the_newest_floor_run_is_set_beside_a_run_of_the_paths(tmp_path):
    for name, start in (("old", 1), ("new", 9)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "floor.json").write_text(json.dumps({**floor_doc(), "testid": name, "start_ms": start}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "floor.json").write_text("{")
    f = floor.newest(tmp_path)
    assert f["testid"] == "new"
    phases = []
    for r in range(1, 5):
        for path, p50 in (("tcp-lo", 0.60), ("uds-lo", 0.50), ("tcp", 0.70), ("uds", 0.52)):
            phases.append({"workload": "ping", "path": path, "round": r,
                           "figures": {"client_p50_ms": p50 + 0.001 * r * (path in ("tcp", "tcp-lo")),
                                                         "rps": 1 / p50 + 0.01 * r * (path in ("uds-lo", "tcp"))}})
    wl = {"ping": {"breakdown": breakdown(phases, "ping")}, "sleep": {}}
    lines = floor.beside_paths(floor.build(f), wl, phases, {"mode": "rate"})
    assert lines[0].startswith("From floor run `new` (6 rounds)")
    socket = next(x for x in lines if "`ping` (100 B), the socket against TCP over loopback" in x)
    assert "alone, round trip 1.50x" in socket and "new connection 1.50x" in socket
    assert socket.endswith("through nginx, TCP over loopback against the socket, new connections (both through "
                           "nginx-lo): 102 µs on the client's median (95% CI 100 to 105 µs, 4 rounds)")
    assert any("`sleep`: catalogue.json gives this workload no floor size" in x for x in lines)
    flat = floor.beside_paths(floor.build(f), wl, phases, {"mode": "max"})
    assert any("`uds-lo` carried 1.21x the requests/s of `tcp-lo`" in x for x in flat)
    assert any("across two nginx, the two nginx" in x for x in flat)
    assert floor.beside_paths(None, wl, phases, {})[0].startswith("No `make floor` run in results/")
