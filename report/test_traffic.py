"""report/traffic.py on a replay whose differences are set in advance: blocks
where the socket's median, p99 and mean are below TCP's by known amounts on
the new-connection pair and equal on the pooled one, a route with enough
requests per block and one with too few."""
import json
import random
from pathlib import Path

from report import interleaved, traffic

CATALOGUE = json.loads((Path(__file__).resolve().parent.parent / "catalogue.json").read_text())
TERMS = CATALOGUE["breakdown"]["terms"]
BLOCKS = 30
# What the socket saves on the new-connection loopback pair (ms): median, p99, mean; pooled: nothing.
SAVED = {"p50": 0.070, "p99": 0.200, "mean": 0.070}


def replay_phase(seed=5):
    rng = random.Random(seed)
    drift = [rng.gauss(0, 0.02) for _ in range(BLOCKS)]  # the machine's swings, shared by every path in a block
    base = {"p50": 0.5, "p99": 2.0, "mean": 0.8}
    paths = ["tcp-lo", "uds-lo", "tcp-lo-ka", "uds-lo-ka"]
    less = {"uds-lo": SAVED, "tcp-lo": {}, "tcp-lo-ka": {}, "uds-lo-ka": {}}

    def block(p, b):
        return {"requests": 40, "failed": 0, **{s: base[s] + drift[b] - less[p].get(s, 0) + rng.gauss(0, 0.002)
                                                 for s in base}}

    def route(n, mean):
        return {p: {"requests": n * BLOCKS, "failed_rate": 0, "duration_ms": {"p50": mean},
                    "blocks": {"n": [n] * BLOCKS,
                               "sum_ms": [n * (mean + drift[b] - less[p].get("mean", 0) + rng.gauss(0, 0.002))
                                          for b in range(BLOCKS)]}} for p in paths}
    return {"name": "traffic__mix__r1", "path": "mix", "round": 1, "block_s": 1, "duration_s": BLOCKS,
            "by_path": {p: {"requests": 40 * BLOCKS, "failed_rate": 0, "blocks": [block(p, b) for b in range(BLOCKS)]}
                        for p in paths},
            "by_route": [{"route": "/users/{id}", "by_path": route(10, 0.9)},
                         {"route": "/rare", "by_path": route(2, 0.4)}]}


LOAD = {"settings": {"traffic": {"send": "emulate", "speed": 1.0, "cycles": 1200, "requests": 4800,
                                 "distinct_routes": 7, "skipped": {"POST": 3}, "route_counts": [300, 60],
                                 "peak_rate": 200, "duration_s": 30}}}


def test_the_traffic_section_finds_what_was_set():
    sec = traffic.section(LOAD, replay_phase(), TERMS, 2)
    new, pooled = (next(c for c in sec["comparisons"] if c["key"] == k) for k in ("socket_new", "socket_pooled"))
    for s, saved in SAVED.items():
        cell = new[s]
        assert cell["lo"] <= saved * 1e3 <= cell["hi"], (s, cell)
        assert cell["verdict"] == "differs" and cell["words"].startswith("faster by "), cell
        assert abs(cell["saved_us"] - saved * 1e3) < 3, cell  # the noise: 2 µs a path and block
        assert pooled[s]["verdict"] in ("same", "unsure"), pooled[s]  # never a difference where none was set
    assert pooled["p50"]["verdict"] == "same"  # equal, to 2 µs of noise against a ±2% margin of 10 µs
    users, rare = sec["routes"]
    assert users["requests"] == 300 and users["median_ms"]["tcp-lo"] == 0.9
    assert users["saved"]["socket_new"]["verdict"] == "differs" and 69 < users["saved"]["socket_new"]["saved_us"] < 71
    # Two of the route's requests a block: no block has a mean, no verdict.
    assert rare["saved"]["socket_new"]["verdict"] == "none" and rare["saved"]["socket_new"]["saved_us"] is None
    # p99 and mean of 2 pairs, and 1 route with blocks on 2 pairs: 6 judged together.
    assert sec["judged_together"] == 6


def test_no_traffic_no_section_and_the_words():
    assert traffic.section({"settings": {}}, replay_phase(), TERMS, 2) is None
    lines = traffic.markdown(traffic.section(LOAD, replay_phase(), TERMS, 2), 2)
    text = "\n".join(lines)
    assert lines[0] == "## Your traffic" and "1,200 logged requests (7 routes)" in text and "POST 3" in text
    assert "| `/users/{id}` | 300 | faster by 7" in text and "Holm, 6 comparisons" in text
    assert "| `/rare` | 60 | too few requests a block (median 0.400 → 0.400 ms)" in text
    assert interleaved.MIN_BLOCK_REQUESTS == 5  # the words above quote it through the module
