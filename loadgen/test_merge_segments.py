"""loadgen/merge_segments.py on what the real openloop writes: one plan run
by two processes at once, each every other request of the stream (as the
chart's Job runs it in two pods), each with its own copy of the plan,
against a server on 127.0.0.1; then their load.json merged into one. And
the merge's arithmetic on histograms of known values."""
import json
import math
import random
import shutil
import subprocess
import time

import jsonschema
import pytest
from hdrh.histogram import HdrHistogram

import merge_segments
import plan as runplan
from test_openloop import SCHEMA, openloop, write_plan  # noqa: F401 (openloop is a fixture)


def run_segments(openloop, tmp_path, plan_path, n=2):  # noqa: F811
    """The n segments at once, each given the run's start instant 1.5 s
    ahead (as the chart's Job gives its pods); returns their load.json paths."""
    procs, outs = [], []
    start_at = int(time.time() * 1000) + 1500
    for i in range(n):
        d = tmp_path / f"pod{i}" / "k1"
        d.mkdir(parents=True)
        shutil.copy(plan_path, d / "plan.json")
        env = {"PLAN": str(d / "plan.json"), "OPENLOOP_SEGMENT": f"{i}/{n}", "OPENLOOP_METRICS_ADDR": "off",
               "OPENLOOP_START_AT": str(start_at)}
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
    # One start: the instant both were given; the merged lateness, the later pod's.
    assert load["start_ms"] == docs[0]["start_ms"] == docs[1]["start_ms"] and load["segments"]["start_spread_ms"] == 0
    assert load["start_late_ms"] == round(max(d["start_late_ms"] for d in docs), 3)
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
    """Three pods of different sizes, start times (within the bound) and
    failures: every merged quantile is the pooled requests' own."""
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
        return {"testid": "k", "settings": {}, "urls": {}, "start_ms": 1000 - 2 * i, "phases": [phase],
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
    assert out["start_ms"] == 996 and out["segments"]["start_spread_ms"] == 4 and "start_late_ms" not in out
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

    out = merge_segments.merge([doc(1003), doc(1000)], ["a", "b"])
    assert out["totals"] == {"requests": 200, "failed_rate": 2 * failed / 200} and out["thresholds_failed"] == thresholds
    assert out["start_ms"] == 1000 and out["segments"]["start_spread_ms"] == 3


@pytest.mark.parametrize("dropped, over", [(100, False), (102, True)])
def test_a_merged_phase_fails_on_drops_over_1_percent_of_the_requests_due(dropped, over):
    """Pod a sent 4,900 and dropped 100 (2% of its own due: openloop names
    the phase), pod b sent 5,000 and dropped none: merged, 100 of the 10,000
    due is 1.0%, not over 1% (openloop's rule); 102 of 10,002 is over."""
    h = HdrHistogram(1, 60_000_000, 3)
    h.record_value(100)
    enc = h.encode().decode()

    def doc(sent, drops):
        named = ["dropped_iterations:ping__tcp__r1"] if drops else []
        return {"testid": "k", "settings": {}, "urls": {}, "start_ms": 1000,
                "phases": [{"name": "ping__tcp__r1", "path": "tcp", "requests": sent, "failed_rate": 0,
                            "dropped_iterations": drops, "hdr": {"sent": enc, "due": enc}}],
                "totals": {"requests": sent, "failed_rate": 0}, "thresholds_failed": named}

    out = merge_segments.merge([doc(4900, dropped), doc(5000, 0)], ["a", "b"])
    assert out["phases"][0]["dropped_iterations"] == dropped
    assert out["thresholds_failed"] == (["dropped_iterations:ping__tcp__r1"] if over else [])


def test_pods_whose_starts_differ_by_more_than_the_bound_are_refused(tmp_path, capsys):
    """Two pods given the instant 1000 (one woke 0.2 ms after it, one 4.9
    ms) merge; a pod whose schedule started 6 ms later (it came up late
    and, as openloop before OPENLOOP_START_AT, counted from its own start)
    is refused, every pod and its start named; so is one whose start is not
    known."""
    h = HdrHistogram(1, 60_000_000, 3)
    h.record_value(100)
    enc = h.encode().decode()

    def doc(start, late=None):
        d = {"testid": "k", "settings": {}, "urls": {}, "start_ms": start,
             "phases": [{"name": "ping__tcp__r1", "path": "tcp", "requests": 10, "failed_rate": 0,
                         "hdr": {"sent": enc, "due": enc}}],
             "totals": {"requests": 10, "failed_rate": 0}, "thresholds_failed": []}
        return d if late is None else {**d, "start_late_ms": late}

    files = {"pod-0.json": doc(1000, 0.2), "pod-1.json": doc(1000, 4.9), "late.json": doc(1006, 0.1),
             "unknown.json": doc(None)}
    for name, d in files.items():
        (tmp_path / name).write_text(json.dumps(d))
    out = tmp_path / "out.json"

    def main(*names):
        return merge_segments.main(["merge_segments.py", str(out), *(str(tmp_path / n) for n in names)])

    assert main("pod-0.json", "pod-1.json") == 0
    merged = json.loads(out.read_text())
    assert (merged["start_ms"], merged["start_late_ms"], merged["segments"]["start_spread_ms"]) == (1000, 4.9, 0)
    out.unlink()
    # Exactly the bound apart is within it.
    (tmp_path / "edge.json").write_text(json.dumps(doc(1005, 0.1)))
    assert main("pod-0.json", "edge.json") == 0 and json.loads(out.read_text())["segments"]["start_spread_ms"] == 5
    out.unlink()
    assert main("pod-0.json", "pod-1.json", "late.json") == 2
    err = capsys.readouterr().err
    assert "start 6 ms apart, more than the 5 ms" in err and "OPENLOOP_START_AT" in err
    assert all(f"{n} {s}" in err for n, s in (("pod-0.json", 1000), ("pod-1.json", 1000), ("late.json", 1006)))
    assert main("pod-0.json", "unknown.json") == 2
    assert "unknown.json None" in capsys.readouterr().err
    assert not out.exists()


def test_durations_are_the_quantiles_openloop_writes():
    """1 to 1,000 µs once each (exact in a histogram of 3 significant
    digits): the median 500 µs, p99.9 999 µs, in ms; nothing recorded, nothing."""
    h = HdrHistogram(1, 60_000_000, 3)
    for v in range(1, 1001):
        h.record_value(v)
    assert merge_segments.durations(h) == {"avg": 0.5005, "p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99,
                                           "p999": 0.999, "max": 1.0}
    assert merge_segments.durations(HdrHistogram(1, 1000, 3)) == {}


# --- The merge by a property: n segments merged are the run one process sent ---

# Leaves of load.json the merge may write otherwise than one process would,
# and why. Every other leaf, found by walking the whole document, must be
# the one process's: counts exactly, shares and means up to float rounding,
# quantiles exactly (the pods' HDR histograms add up to the run's), strings,
# nulls and the histograms themselves (by their counts, not their bytes).
ONLY_MERGED = {
    ("segments",): "only the merge writes it: how many pods, their requests and start spread",
}


@pytest.fixture(scope="module")
def fixtures_binary(tmp_path_factory):
    """TestMergeFixtures (loadgen/openloop/fixtures_test.go) built once with
    openloop's code and none of its other tests (a test of its own being
    edited does not stop this one): it records drawn requests whole and in
    segments with openloop's own records and load.json."""
    src, work = runplan.HERE / "openloop", tmp_path_factory.mktemp("openloop")
    for f in [src / "go.mod", src / "go.sum", src / "fixtures_test.go",
              *(f for f in src.glob("*.go") if not f.name.endswith("_test.go"))]:
        shutil.copy(f, work)
    out = work / "openloop.test"
    res = subprocess.run(["go", "test", "-c", "-o", str(out), "."], cwd=work, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    return out


def fixtures(binary, d, seed, n):
    """(the whole run's load.json, its n segments'), as openloop writes them."""
    d.mkdir()
    env = {"OPENLOOP_FIXTURES_DIR": str(d), "OPENLOOP_FIXTURES_SEED": str(seed), "OPENLOOP_FIXTURES_SEGMENTS": str(n),
           "PATH": "/usr/bin:/bin"}
    res = subprocess.run([str(binary), "-test.run", "^TestMergeFixtures$", "-test.count=1"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads((d / "whole.json").read_text()), [json.loads((d / f"seg-{i}.json").read_text()) for i in range(n)]


def recorded(encoded):
    """A histogram's counts, {value: count}, from its encoded form."""
    h = HdrHistogram.decode(encoded)
    return {it.value_iterated_to: it.count_at_value_iterated_to for it in h.get_recorded_iterator()}


def name(path):
    return ".".join(map(str, path)) or "(load.json)"


def differences(got, want, path=()):
    """Where got is not want, leaf by leaf, each named by its path."""
    if path in ONLY_MERGED:
        return []
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{name(path + (k,))}: missing from the merge" for k in want if k not in got]
        out += [f"{name(path + (k,))}: the merge has it, the run not" for k in got
                if k not in want and path + (k,) not in ONLY_MERGED]
        return out + [d for k in want if k in got for d in differences(got[k], want[k], path + (k,))]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{name(path)}: {len(got)} items, the run {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, path + (i,))]
    if "hdr" in path and isinstance(want, str) and isinstance(got, str):
        g, w = HdrHistogram.decode(got), HdrHistogram.decode(want)
        same = bytes(g.counts) == bytes(w.counts) or recorded(got) == recorded(want)  # the first, fast
    elif isinstance(want, bool) or isinstance(got, bool) or not all(isinstance(v, (int, float)) for v in (got, want)):
        same = type(got) is type(want) and got == want
    elif isinstance(want, int) and isinstance(got, int):
        same = got == want
    else:
        same = math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15)
    return [] if same else [f"{name(path)}: merged {got!r}, the run {want!r}"]


def measured_leaves(doc, path=()):
    """{path with list indexes as "*": value} of doc's numeric leaves."""
    if isinstance(doc, dict):
        return {k: v for key, sub in doc.items() for k, v in measured_leaves(sub, path + (key,)).items()}
    if isinstance(doc, list):
        return {k: v for sub in doc for k, v in measured_leaves(sub, path + ("*",)).items()}
    return {path: doc} if isinstance(doc, (int, float)) and not isinstance(doc, bool) else {}


# (seed, n): random requests split among 2 to 9 pods, and among 40 (more
# pods than a warm-up's requests: some have none of it).
SPLITS = [(random.Random(51 + k).randrange(10**6), n)
          for k, n in enumerate((2, 3, random.Random(51).randint(4, 9), 40))]


def test_merged_segments_are_the_run_one_process_sent_field_by_field(fixtures_binary, tmp_path):
    """For every field of load.json (top level, totals, each phase, its
    by_path, each block; durations as quantiles and their histograms), the
    merge of openloop's n segments of a run is what openloop writes for the
    same requests sent by one process (the run starting at the pods' start
    instant, as late as its last pod began). A field openloop adds without a merge rule is pod 0's in the
    merge, and fails here, named."""
    varies = set()
    for seed, n in SPLITS:
        whole, segs = fixtures(fixtures_binary, tmp_path / f"{seed}-{n}", seed, n)
        merged = merge_segments.merge(segs, [f"seg-{i}.json" for i in range(n)])
        assert differences(merged, whole) == [], f"seed {seed}, {n} pods"
        assert merged["segments"]["pods"] == n and sum(merged["segments"]["requests"]) == whole["totals"]["requests"]
        first = measured_leaves(segs[0])
        varies |= {k for k, v in measured_leaves(whole).items() if k not in first or differences(first[k], v)}
    # The test's own reach: a figure that pod 0 never has otherwise than the
    # run could go unmerged unseen. Only the plan's own fields are the same,
    # and start_ms: every pod's is the run's start instant (OPENLOOP_START_AT;
    # the merge of starts that differ: test_a_merge_gives_the_figures_of_the_pooled_requests).
    plan_fields = {k for k in measured_leaves(whole) if k[-1] in {"gap_s", "start_offset_s", "duration_s", "block_s",
                                                                  "round", "rate", "seed"}}
    assert set(measured_leaves(whole)) - plan_fields - {("start_ms",)} - varies == set()
