"""bench_wrk.py's verdict: the lab's ratios to tcp against wrk's, round by round."""
import bench_wrk

# Requests/s per path and round: each path a multiple of tcp.
FACTORS = {p: 1 + i / 2 for i, p in enumerate(bench_wrk.PATHS)}


def measured(tcp_by_round, factors=FACTORS):
    return {p: {r: f * v for r, v in tcp_by_round.items()} for p, f in factors.items()}


def test_agreeing_ratios_pass():
    rows, ok = bench_wrk.compare(measured({1: 3900, 2: 4100}), measured({1: 4000, 2: 4200}), 0.15)
    assert ok and [r[0] for r in rows] == bench_wrk.PATHS and all(r[5] for r in rows)
    uds = next(r for r in rows if r[0] == "uds")
    assert abs(uds[2] - FACTORS["uds"]) < 1e-9 and abs(uds[1] - FACTORS["uds"] * 4000) < 1e-9


def test_a_generator_at_its_ceiling_or_a_missing_path_disagrees():
    wrk = measured({1: 4000, 2: 4200})
    # A generator at its own limit gives every path the same figure.
    capped = measured({1: 7000, 2: 7000}, {p: 1.0 for p in FACTORS})
    rows, ok = bench_wrk.compare(capped, wrk, 0.15)
    assert not ok and [r[0] for r in rows if not r[5]] == [p for p in bench_wrk.PATHS if p != "tcp"]
    lab = measured({1: 4000, 2: 4200})
    del lab["uds"]
    rows, ok = bench_wrk.compare(lab, wrk, 0.15)
    assert not ok and [r[0] for r in rows if not r[5]] == ["uds"]
