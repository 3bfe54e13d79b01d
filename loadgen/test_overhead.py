"""make overhead's summary: verdicts at their boundaries, paired rounds, and
the files it reads and writes."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # noqa: E402


def load(path_rps, p50_ms=None, mode="max", failed=0.0, dropped=0):
    """A one-round load.json as the generators write it (a warm-up, then the measured phase)."""
    phases = []
    for path, rps in path_rps.items():
        for phase in ("warmup", "measure"):
            phases.append({
                "name": f"ping__{path}__r{0 if phase == 'warmup' else 1}", "workload": "ping", "path": path,
                "round": 0 if phase == "warmup" else 1, "phase": phase, "endpoint": "/ping",
                "duration_s": 10.0, "requests": int(rps * 10), "failed_rate": failed, "dropped_iterations": dropped,
                "duration_ms": {"p50": (p50_ms or {}).get(path, 1.0)},
            })
    settings = {"paths": list(path_rps), "workloads": ["ping"], "duration": 10, "connections": 64, "rate": 500}
    return {"settings": {**settings, "mode": mode, "generator": "wrk" if mode == "max" else "openloop"}, "phases": phases}


def write_run(root, setup, rnd, rps, p50=None, **kw):
    d = root / f"{setup}-r{rnd}"
    d.mkdir()
    (d / "max.json").write_text(json.dumps(load(rps)))
    (d / "rate.json").write_text(json.dumps(load(rps, p50, mode="rate", **kw)))


def runs_with(full, bare):
    """Three rounds of one path: throughput per round for full and bare."""
    return {
        "full": {r + 1: {"ping tcp": {"rps": v, "p50_ms": 1.0, "failed_rate": 0, "dropped": 0}} for r, v in enumerate(full)},
        "bare": {r + 1: {"ping tcp": {"rps": v, "p50_ms": 1.0, "failed_rate": 0, "dropped": 0}} for r, v in enumerate(bare)},
    }


@pytest.mark.parametrize("full, verdict, meets", [
    ([990, 1010, 1000], "no measurable cost", True),        # spread includes no change
    ([800, 1010, 990], "too wide to confirm the budget", True),  # median 99%, one round at 80%
    ([1010, 1020, 1030], "no measurable cost", True),       # full faster in every round: noise
    ([970, 975, 980], "within the 3% budget", True),        # 2.5%: the median at or above 97%
    ([970, 970, 970], "within the 3% budget", True),        # exactly the budget
    ([960, 969, 975], "OVER the 3% budget", False),         # median 96.9%
])
def test_observing_verdict_at_the_budget(full, verdict, meets):
    result = overhead.summarize(runs_with(full, [1000, 1000, 1000]))
    c = result["comparisons"]["observing"]
    assert verdict in c["paths"]["ping tcp"]["verdict"]
    assert c["meets_goal"] is meets
    # A median within the budget with some round below it is named as unconfirmed.
    assert (c["unconfirmed"] == ["ping tcp"]) is (min(full) < 970 and meets)


def test_rounds_are_paired_not_pooled():
    # Drift: both setups slow down round by round; per round full keeps 98%.
    bare = [1000, 900, 800]
    full = [v * 0.98 for v in bare]
    ratio = overhead.summarize(runs_with(full, bare))["comparisons"]["observing"]["paths"]["ping tcp"]["ratio"]
    assert ratio["min"] == pytest.approx(0.98) and ratio["max"] == pytest.approx(0.98)


def test_latency_verdict():
    assert overhead.verdict_latency({"median": 5, "min": -3, "max": 8}) == "no measurable difference"
    assert overhead.verdict_latency({"median": 40, "min": 12, "max": 60}) == "+40 µs"
    assert overhead.verdict_latency(None) == "-"


def test_framework_verdict():
    assert overhead.verdict_framework({"median": 0.8, "min": 0.78, "max": 0.83}) == "Gin serves 20.0% fewer requests/s"
    assert overhead.verdict_framework({"median": 1.0, "min": 0.97, "max": 1.02}) == "no measurable difference"


def test_main_reads_runs_and_writes_the_summary(tmp_path, capsys):
    for r in (1, 2, 3):
        write_run(tmp_path, "full", r, {"tcp": 4000, "uds": 9000}, {"tcp": 1.2, "uds": 0.8})
        write_run(tmp_path, "bare", r, {"tcp": 4100, "uds": 9100}, {"tcp": 1.1, "uds": 0.8})
        write_run(tmp_path, "minimal", r, {"tcp": 4500, "uds": 12000}, {"tcp": 1.0, "uds": 0.6}, dropped=3)
    assert overhead.main(["overhead.py", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "overhead.json").read_text())
    obs = result["comparisons"]["observing"]["paths"]
    assert set(obs) == {"ping tcp", "ping uds"}
    assert obs["ping tcp"]["p50_diff_us"]["median"] == pytest.approx(100)
    assert result["comparisons"]["framework"]["paths"]["ping uds"]["ratio"]["median"] == pytest.approx(9100 / 12000)
    assert any("minimal round 1 ping tcp" in w for w in result["warnings"])
    md = (tmp_path / "overhead.md").read_text()
    assert "## Observing" in md and "## Framework" in md and "the generator dropped 3 requests" in md
    assert md in capsys.readouterr().out


def test_main_needs_two_setups(tmp_path):
    write_run(tmp_path, "full", 1, {"tcp": 4000})
    assert overhead.main(["overhead.py", str(tmp_path)]) == 2
