"""loadgen/merge_segments.py on what the real k6 writes: one plan run as two
execution segments at once (as the chart's Job runs it in two pods), each
k6 with its own copy of the plan (each pod has its own folder), against a
server on 127.0.0.1; then their load.json merged into one."""
import json
import shutil
import subprocess

import jsonschema

import merge_segments
import plan as runplan
from test_k6 import SCRIPT, k6, k6_env, write_plan  # noqa: F401 (k6 is a fixture)


def run_segments(k6, tmp_path, plan_path):  # noqa: F811
    """Both segments at once; returns their load.json paths."""
    procs, outs = [], []
    for i, seg in enumerate(("0:1/2", "1/2:1")):
        d = tmp_path / f"pod{i}" / "k1"
        d.mkdir(parents=True)
        shutil.copy(plan_path, d / "plan.json")
        procs.append(subprocess.Popen(
            [k6, "run", "--quiet", "--no-color", "--execution-segment", seg,
             "--execution-segment-sequence", "0,1/2,1", str(SCRIPT)],
            env=k6_env(PLAN=d / "plan.json"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs.append(d / "load.json")
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    return outs


def test_two_segments_of_one_stream_merge_into_the_runs_load_json(k6, tmp_path, local_catalogue):  # noqa: F811
    catalogue, hits = local_catalogue
    plan_path, _ = write_plan(tmp_path, CATALOGUE=catalogue, PATHS="tcp-lo,uds-lo,uds", ROUNDS=1, WARMUP=0,
                              DURATION=1, RATE=60, IDLE=0, INTERLEAVE=10)
    parts = run_segments(k6, tmp_path, plan_path)
    docs = [json.loads(p.read_text()) for p in parts]
    out = tmp_path / "load.json"
    assert merge_segments.main(["merge_segments.py", str(out), *map(str, parts)]) == 0
    load = json.loads(out.read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))

    # Counts add up, and are what the server saw.
    assert load["segments"]["pods"] == 2
    assert load["segments"]["requests"] == [d["totals"]["requests"] for d in docs]
    assert all(n > 0 for n in load["segments"]["requests"])
    assert load["totals"]["requests"] == sum(load["segments"]["requests"]) == sum(hits.values())
    # Each segment took about half the arrivals, and the stream stays balanced
    # across the pods: k6 numbers iterations across segments, so each cycle
    # of len(paths) requests still holds every path once.
    (mix,) = [p for p in load["phases"] if p["name"] == "ping__mix__r1"]
    parts_mix = [next(p for p in d["phases"] if p["name"] == "ping__mix__r1") for d in docs]
    assert abs(parts_mix[0]["requests"] - parts_mix[1]["requests"]) <= 2
    total = sum(v["requests"] for v in mix["by_path"].values())
    assert total == mix["requests"] == sum(p["requests"] for p in parts_mix) >= 570  # 60 req/s for 10 s
    for name, v in mix["by_path"].items():
        assert abs(v["requests"] - total / 3) <= 2, (name, v["requests"])
        assert len(v["blocks"]) == 10 and sum(b["requests"] for b in v["blocks"]) == v["requests"]
        for b, (x, y) in zip(v["blocks"], zip(*(p["by_path"][name]["blocks"] for p in parts_mix))):
            # A merged median: the request-weighted mean of the pods' own.
            assert b["requests"] == x["requests"] + y["requests"]
            assert min(x["p50"], y["p50"]) <= b["p50"] <= max(x["p50"], y["p50"])
            assert abs(b["p50"] * b["requests"] - (x["p50"] * x["requests"] + y["p50"] * y["requests"])) < 1e-6
        assert v["duration_ms"]["max"] == max(p["by_path"][name]["duration_ms"]["max"] for p in parts_mix)


def test_load_json_of_different_runs_is_refused(tmp_path, capsys):
    a = {"testid": "k1", "settings": {"rate": 60}, "urls": {}, "start_ms": 1, "phases": [{"name": "x"}],
         "totals": {"requests": 1, "failed_rate": 0}, "thresholds_failed": []}
    b = {**a, "settings": {"rate": 70}}
    for name, doc in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(doc))
    assert merge_segments.main(["merge_segments.py", str(tmp_path / "out.json"), str(tmp_path / "a.json"),
                                str(tmp_path / "b.json")]) == 2
    assert "b.json: its settings differ" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
