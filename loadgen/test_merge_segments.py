"""loadgen/merge_segments.py on what the real openloop writes: one plan run
by two processes at once, each every other request of the stream (as the
chart's Job runs it in two pods), each with its own copy of the plan,
against a server on 127.0.0.1; then their load.json merged into one. And
the merge's arithmetic on histograms of known values."""
import json
import random
import shutil
import subprocess

import jsonschema
import pytest
from hdrh.histogram import HdrHistogram

import merge_segments
import plan as runplan
from test_openloop import SCHEMA, openloop, write_plan  # noqa: F401 (openloop is a fixture)


def run_segments(openloop, tmp_path, plan_path, n=2):  # noqa: F811
    """The n segments at once; returns their load.json paths."""
    procs, outs = [], []
    for i in range(n):
        d = tmp_path / f"pod{i}" / "k1"
        d.mkdir(parents=True)
        shutil.copy(plan_path, d / "plan.json")
        env = {"PLAN": str(d / "plan.json"), "OPENLOOP_SEGMENT": f"{i}/{n}", "OPENLOOP_METRICS_ADDR": "off"}
        procs.append(subprocess.Popen([str(openloop)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
        outs.append(d / "load.json")
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    return outs


def test_two_segments_of_one_stream_merge_into_the_runs_load_json(openloop, tmp_path, local_catalogue):  # noqa: F811
    catalogue, hits = local_catalogue
    plan_path, _ = write_plan(tmp_path, CATALOGUE=catalogue, PATHS="tcp-lo,uds-lo,uds", ROUNDS=1, WARMUP=0,
                              DURATION=1, RATE=60, IDLE=0, INTERLEAVE=10)
    parts = run_segments(openloop, tmp_path, plan_path)
    docs = [json.loads(p.read_text()) for p in parts]
    out = tmp_path / "load.json"
    assert merge_segments.main(["merge_segments.py", str(out), *map(str, parts)]) == 0
    load = json.loads(out.read_text())
    jsonschema.validate(load, SCHEMA)

    # Counts add up, and are what the server saw.
    assert load["segments"]["pods"] == 2
    assert load["segments"]["requests"] == [d["totals"]["requests"] for d in docs]
    assert load["totals"]["requests"] == sum(load["segments"]["requests"]) == sum(hits.values())
    assert load["start_ms"] == min(d["start_ms"] for d in docs)
    # Together the pods sent the stream once: every block of every path holds
    # its 20 requests (60 req/s, 3 paths), half from each pod.
    (mix,) = [p for p in load["phases"] if p["name"] == "ping__mix__r1"]
    parts_mix = [next(p for p in d["phases"] if p["name"] == "ping__mix__r1") for d in docs]
    assert [p["requests"] for p in parts_mix] == [300, 300] and mix["requests"] == 600
    for name, v in mix["by_path"].items():
        assert v["requests"] == 200 and len(v["blocks"]) == 10
        for b, (x, y) in zip(v["blocks"], zip(*(p["by_path"][name]["blocks"] for p in parts_mix))):
            assert b["requests"] == x["requests"] + y["requests"] == 20
            # The merged median is the median of the pooled requests.
            pooled = HdrHistogram.decode(x["hdr"])
            pooled.add(HdrHistogram.decode(y["hdr"]))
            assert b["p50"] == pooled.get_value_at_percentile(50) / 1000
            assert min(x["p50"], y["p50"]) <= b["p50"] <= max(x["p50"], y["p50"])
        assert v["duration_ms"]["max"] == max(p["by_path"][name]["duration_ms"]["max"] for p in parts_mix)
    # Python reads each pod's histograms as Go wrote its figures from them.
    for d in docs:
        for ph in d["phases"]:
            assert merge_segments.durations(HdrHistogram.decode(ph["hdr"]["sent"])) == pytest.approx(ph["duration_ms"], rel=1e-12)


def test_a_merge_gives_the_figures_of_the_pooled_requests():
    """Three pods of different sizes, start times and failures: every
    merged quantile is the pooled requests' own."""
    rng = random.Random(5)
    values = [[int(rng.lognormvariate(6, 0.5)) + 1 for _ in range(n)] for n in (500, 1200, 30)]
    failed = [3, 0, 30]

    def hist(vs):
        h = HdrHistogram(1, 60_000_000, 3)
        for v in vs:
            h.record_value(v)
        return h

    def doc(i):
        h = hist(values[i]).encode().decode()
        n = len(values[i]) + failed[i]
        phase = {"name": "ping__mix__r1", "path": "mix", "requests": n, "failed_rate": failed[i] / n,
                 "late_rate": 0, "dropped_iterations": i, "hdr": {"sent": h, "due": h},
                 "statuses": {"502": failed[i] - i, "0": i, "refused": i},
                 "by_path": {"uds": {"requests": n, "failed_rate": failed[i] / n, "hdr": {"sent": h, "due": h},
                                     "blocks": [{"requests": n, "failed": failed[i], "p50": None, "hdr": h}]}}}
        return {"testid": "k", "settings": {}, "urls": {}, "start_ms": 1000 - 7 * i, "phases": [phase],
                "totals": {"requests": n, "failed_rate": failed[i] / n}, "thresholds_failed": []}

    out = merge_segments.merge([doc(i) for i in range(3)], ["a", "b", "c"])
    pooled = hist([v for vs in values for v in vs])
    (ph,) = out["phases"]
    assert ph["duration_ms"] == merge_segments.durations(pooled)
    assert ph["duration_ms"]["p99"] == pooled.get_value_at_percentile(99) / 1000
    assert ph["requests"] == 1730 + 33 and ph["failed_rate"] == 33 / 1763 and ph["dropped_iterations"] == 3
    assert ph["statuses"] == {"502": 30, "0": 3, "refused": 3}
    (block,) = ph["by_path"]["uds"]["blocks"]
    assert (block["requests"], block["failed"], block["p50"]) == (1763, 33, pooled.get_value_at_percentile(50) / 1000)
    assert out["start_ms"] == 986 and out["segments"]["start_spread_ms"] == 14
    assert out["totals"] == {"requests": 1763, "failed_rate": 33 / 1763} and out["thresholds_failed"] == ["http_req_failed"]


def test_load_json_of_different_runs_is_refused(tmp_path, capsys):
    hdr = {"sent": "", "due": ""}
    a = {"testid": "k1", "settings": {"rate": 60}, "urls": {}, "start_ms": 1, "phases": [{"name": "x", "hdr": hdr}],
         "totals": {"requests": 1, "failed_rate": 0}, "thresholds_failed": []}
    b = {**a, "settings": {"rate": 70}}
    c = {**a, "phases": [{"name": "x"}]}
    d = {**a, "urls": {"tcp": "http://elsewhere"}}
    for name, doc in (("a.json", a), ("b.json", b), ("c.json", c), ("d.json", d)):
        (tmp_path / name).write_text(json.dumps(doc))
    out = str(tmp_path / "out.json")
    assert merge_segments.main(["merge_segments.py", out, str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    assert "b.json: its settings differ" in capsys.readouterr().err
    assert merge_segments.main(["merge_segments.py", out, str(tmp_path / "a.json"), str(tmp_path / "c.json")]) == 2
    assert "c.json: no histograms" in capsys.readouterr().err
    assert merge_segments.main(["merge_segments.py", out, str(tmp_path / "a.json"), str(tmp_path / "d.json")]) == 2
    assert "d.json: its urls differ" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("failed, thresholds", [(1, []), (2, ["http_req_failed"])])
def test_the_merged_run_fails_its_threshold_above_1_percent_as_openloop_does(failed, thresholds):
    """Two pods of 100 requests, failed of them each: 1% of the run's requests is not above 1% (openloop's rule)."""
    h = HdrHistogram(1, 60_000_000, 3)
    h.record_value(100)
    enc = h.encode().decode()

    def doc(start):
        return {"testid": "k", "settings": {}, "urls": {}, "start_ms": start,
                "phases": [{"name": "ping__tcp__r1", "path": "tcp", "requests": 100, "failed_rate": failed / 100,
                            "hdr": {"sent": enc, "due": enc}}],
                "totals": {"requests": 100, "failed_rate": failed / 100}, "thresholds_failed": thresholds}

    out = merge_segments.merge([doc(2000), doc(1000)], ["a", "b"])
    assert out["totals"] == {"requests": 200, "failed_rate": 2 * failed / 200} and out["thresholds_failed"] == thresholds
    assert out["start_ms"] == 1000 and out["segments"]["start_spread_ms"] == 1000


def test_durations_are_the_quantiles_openloop_writes():
    """1 to 1,000 µs once each (exact in a histogram of 3 significant
    digits): the median 500 µs, p99.9 999 µs, in ms; nothing recorded, nothing."""
    h = HdrHistogram(1, 60_000_000, 3)
    for v in range(1, 1001):
        h.record_value(v)
    assert merge_segments.durations(h) == {"avg": 0.5005, "p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99,
                                           "p999": 0.999, "max": 1.0}
    assert merge_segments.durations(HdrHistogram(1, 1000, 3)) == {}
