"""The lab's load generator, loadgen/openloop, built from this checkout and
run for a few seconds against a server on 127.0.0.1 on plans plan.py wrote:
it writes a load.json of load.schema.json's shape beside the plan, says the
plan's length first and each phase as it starts, interleaves every path in
one stream with each one's blocks, counts how a failing path fails, and its
pods' halves merge exactly (loadgen/merge_segments.py). Its own behaviour in
detail: loadgen/openloop/*_test.go."""
import json
import subprocess

import jsonschema
import pytest

import merge_segments
import plan as runplan

SCHEMA = json.loads(runplan.SCHEMA.read_text())


@pytest.fixture(scope="module")
def openloop(tmp_path_factory):
    out = tmp_path_factory.mktemp("bin") / "openloop"
    res = subprocess.run(["go", "build", "-o", str(out), "."], cwd=runplan.HERE / "openloop", capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return out


def run(openloop, plan, **env):
    """openloop on a plan, scraped by nobody: its exit code and output."""
    env = {"PLAN": str(plan), "OPENLOOP_METRICS_ADDR": "off", "PATH": "/usr/bin:/bin", **env}
    res = subprocess.run([str(openloop)], env=env, capture_output=True, text=True, timeout=120)
    return res.returncode, res.stdout + res.stderr


def write_plan(tmp_path, **settings):
    """plan.json as `make load` writes it (python3 plan.py); returns its path and content."""
    env = {"RESULTS": str(tmp_path), "TESTID": "k1", "SEED": "4", **{k: str(v) for k, v in settings.items()}}
    assert runplan.main(env) == 0
    path = tmp_path / env["TESTID"] / "plan.json"
    return path, json.loads(path.read_text())


def test_openloop_without_a_plan_says_how_to_get_one(openloop):
    rc, out = run(openloop, "")
    assert rc == 2 and "PLAN: empty" in out


def test_openloop_refuses_a_flat_out_plan(openloop, tmp_path):
    path, _ = write_plan(tmp_path, MODE="max", GENERATOR="wrk", PATHS="tcp", ROUNDS=1, WARMUP=0, DURATION=1, IDLE=0)
    rc, out = run(openloop, path)
    assert rc == 2 and "make max runs wrk or oha" in out


def test_openloop_writes_a_load_json_of_the_schemas_shape(openloop, tmp_path, local_catalogue):
    catalogue, hits = local_catalogue
    path, doc = write_plan(tmp_path, CATALOGUE=catalogue, SCENARIO="bytes-100", PATHS="uds-ka", ROUNDS=1,
                           WARMUP=0, DURATION=1, RATE=20, IDLE=1, INTERLEAVE=0)
    rc, out = run(openloop, path)
    assert rc == 0, out
    assert f"uds-lab openloop run k1: {doc['describe']}" in out, out
    assert doc["phases"][0]["progress"] in out
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, SCHEMA)
    stats = ("requests", "failed_rate", "dropped_iterations", "duration_ms", "late_rate", "scheduled_ms", "hdr",
             "statuses", "queue_ms", "first_byte_ms", "connections_opened")
    assert load["phases"][0]["statuses"] == {"502": 0, "503": 0, "504": 0, "0": 0, "refused": 0, "reset": 0,
                                             "timeout": 0, "connect_timeout": 0}
    planned = [{k: v for k, v in p.items() if k not in ("url", "progress")} for p in doc["phases"]]
    assert [{k: v for k, v in p.items() if k not in stats} for p in load["phases"]] == planned
    (ph,) = load["phases"]
    assert ph["requests"] == 20 and ph["failed_rate"] == 0 and hits["/uds-ka/bytes/100"] == ph["requests"]
    assert load["settings"] == doc["settings"] and load["settings"]["generator"] == "openloop"
    assert (load["gap_s"], load["idle"], load["urls"]) == (doc["gap_s"], {"start_offset_s": 0, "duration_s": 1}, doc["urls"])


def test_openloop_writes_a_later_batchs_load_beside_its_plan(openloop, tmp_path, local_catalogue):
    """A PRECISION run's batch from round 3: plan-r3.json in, load-r3.json out
    (loadgen/drive.py merges it), load.json untouched."""
    catalogue, _ = local_catalogue
    env = {"RESULTS": str(tmp_path), "TESTID": "k2", "SEED": "4", "CATALOGUE": str(catalogue), "PATHS": "uds",
           "INTERLEAVE": "0",
           "SCENARIO": "ping", "ROUNDS": "2", "DURATION": "1", "RATE": "20", "PRECISION": "5", "FIRST_ROUND": "3"}
    assert runplan.main(env) == 0
    rc, out = run(openloop, tmp_path / "k2" / "plan-r3.json")
    assert rc == 0, out
    assert sorted(p.name for p in (tmp_path / "k2").iterdir()) == ["load-r3.json", "plan-r3.json"]
    load = json.loads((tmp_path / "k2" / "load-r3.json").read_text())
    jsonschema.validate(load, SCHEMA)
    assert [p["round"] for p in load["phases"]] == [3, 4] and load["idle"] is None


def test_openloop_interleaves_every_path_in_one_stream_and_writes_each_ones_blocks(openloop, tmp_path, local_catalogue):
    """make load's interleaved phase: one arrival stream, every path in each
    cycle of len(paths) requests, each path's median per block in load.json."""
    catalogue, hits = local_catalogue
    path, doc = write_plan(tmp_path, CATALOGUE=catalogue, PATHS="tcp-lo,uds-lo,uds", ROUNDS=1, WARMUP=1, DURATION=1,
                           RATE=60, IDLE=0, INTERLEAVE=10)
    rc, out = run(openloop, path)
    assert rc == 0, out
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, SCHEMA)
    (mix,) = [p for p in load["phases"] if p["name"] == "ping__mix__r1"]
    assert sorted(mix["by_path"]) == ["tcp-lo", "uds", "uds-lo"]
    total = sum(v["requests"] for v in mix["by_path"].values())
    assert total == mix["requests"] == 600  # 60 req/s for 10 s
    for p, v in mix["by_path"].items():
        assert v["requests"] == 200, (p, v["requests"])  # each path once a cycle
        assert len(v["blocks"]) == 10 and sum(b["requests"] for b in v["blocks"]) == v["requests"]
        assert all(b["requests"] == 20 and b["failed"] == 0 and b["p50"] > 0 for b in v["blocks"]), v["blocks"]
    # The stream and then each path alone: the server saw every request by its path.
    alone = {p["path"]: p["requests"] for p in load["phases"] if p["path"] != "mix"}
    warmup = next(p for p in load["phases"] if p["name"] == "ping__mix__r0")
    warm = warmup["requests"]
    assert sum(v["requests"] for v in warmup["by_path"].values()) == warm > 0  # by path, without blocks
    assert all(v["blocks"] == [] for v in warmup["by_path"].values())
    assert sum(hits[f"/{p}/ping"] for p in alone) == total + warm + sum(alone.values())


def test_openloop_runs_a_sweeps_step_at_its_rate_and_counts_how_a_path_fails(openloop, tmp_path, local_catalogue):
    """make sweep's step 2: plan-s2.json in, load-s2.json out, each phase at
    the step's rate and with its failing responses by status (a 502 route here)."""
    catalogue, hits = local_catalogue
    env = {"RESULTS": str(tmp_path), "TESTID": "k3", "SEED": "4", "CATALOGUE": str(catalogue), "MODE": "sweep",
           "PATHS": "uds", "SCENARIO": "custom", "ENDPOINT": "/status/502", "SWEEP_RATES": "10,30",
           "SWEEP_STEP": "2", "SWEEP_ROUNDS": "2", "DURATION": "1", "WARMUP": "0", "IDLE": "0", "INTERLEAVE": "0"}
    assert runplan.main(env) == 0
    rc, out = run(openloop, tmp_path / "k3" / "plan-s2.json")
    assert rc == 1, out  # every request failed: more than 1%, as past a limit
    assert sorted(p.name for p in (tmp_path / "k3").iterdir()) == ["load-s2.json", "plan-s2.json"]
    load = json.loads((tmp_path / "k3" / "load-s2.json").read_text())
    jsonschema.validate(load, SCHEMA)
    assert [(p["step"], p["rate"], p["round"]) for p in load["phases"]] == [(2, 30, 1), (2, 30, 2)]
    for p in load["phases"]:
        assert p["requests"] == 30 and p["failed_rate"] == 1  # 30 req/s for 1 s
        assert p["statuses"] == {"502": p["requests"], "503": 0, "504": 0, "0": 0, "refused": 0, "reset": 0,
                                 "timeout": 0, "connect_timeout": 0}
        assert p["duration_ms"] == {}  # a failure is counted, never timed
    assert hits["/uds/status/502"] == sum(p["requests"] for p in load["phases"])


def test_openloop_runs_a_sweeps_interleaved_stream_at_the_steps_rate(openloop, tmp_path, local_catalogue):
    """A sweep's step opens with its stream: every path of the step in one
    arrival stream at the step's rate, counted per path and per block."""
    catalogue, hits = local_catalogue
    env = {"RESULTS": str(tmp_path), "TESTID": "k4", "SEED": "4", "CATALOGUE": str(catalogue), "MODE": "sweep",
           "PATHS": "tcp,uds", "SWEEP_RATES": "10,40", "SWEEP_STEP": "2", "SWEEP_ROUNDS": "2", "DURATION": "1",
           "WARMUP": "0", "IDLE": "0", "INTERLEAVE": "10"}
    assert runplan.main(env) == 0
    rc, out = run(openloop, tmp_path / "k4" / "plan-s2.json")
    assert rc == 0, out[-2000:]
    load = json.loads((tmp_path / "k4" / "load-s2.json").read_text())
    jsonschema.validate(load, SCHEMA)
    mix = load["phases"][0]
    assert (mix["path"], mix["step"], mix["rate"]) == ("mix", 2, 40)
    assert set(mix["by_path"]) == {"tcp", "uds"}
    for v in mix["by_path"].values():
        assert v["requests"] == 200 and len(v["blocks"]) == 10  # 40 req/s shared by two paths for 10 s



def test_a_failing_path_in_the_stream_is_counted_by_status_and_never_timed(openloop, tmp_path, local_catalogue, fail_paths):
    """A path of the stream whose every request fails (nginx's 502 where it
    cannot reach the socket): its statuses in the stream, no median in any
    block; the other path is timed as ever."""
    catalogue, hits = local_catalogue
    fail_paths["/uds-lo/"] = 502
    path, doc = write_plan(tmp_path, CATALOGUE=catalogue, PATHS="tcp-lo,uds-lo", ROUNDS=0, WARMUP=0, RATE=40, IDLE=0,
                           INTERLEAVE=10)
    rc, out = run(openloop, path)
    assert rc == 1, out  # half the requests failed: more than 1%
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, SCHEMA)
    (mix,) = load["phases"]
    bad, good = mix["by_path"]["uds-lo"], mix["by_path"]["tcp-lo"]
    assert bad["failed_rate"] == 1 and bad["statuses"]["502"] == bad["requests"] == hits["/uds-lo/ping"] == 200
    assert bad["duration_ms"] == {} and all(b["p50"] is None and b["failed"] == b["requests"] for b in bad["blocks"])
    assert good["failed_rate"] == 0 and not any(good["statuses"].values())
    assert all(b["p50"] > 0 for b in good["blocks"])
    assert mix["statuses"]["502"] == 200


def test_openloop_runs_a_stream_per_connection_handling(openloop, tmp_path, local_catalogue):
    """The pooled paths' stream, then the others': each at the rate, each path
    once a cycle of its own stream, none in the other's."""
    catalogue, hits = local_catalogue
    path, doc = write_plan(tmp_path, CATALOGUE=catalogue, PATHS="tcp-lo,uds-lo,uds-lo-ka", ROUNDS=0, WARMUP=0, RATE=30,
                           IDLE=0, INTERLEAVE=10)
    rc, out = run(openloop, path)
    assert rc == 0, out
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, SCHEMA)
    pooled, new = load["phases"]
    assert (pooled["name"], pooled["stream"], sorted(pooled["by_path"])) == ("ping__mix-pooled__r1", "pooled", ["uds-lo-ka"])
    assert (new["name"], new["stream"], sorted(new["by_path"])) == ("ping__mix-new__r1", "new", ["tcp-lo", "uds-lo"])
    assert pooled["requests"] == new["requests"] == 300  # 30 req/s for 10 s, each
    assert [v["requests"] for v in new["by_path"].values()] == [150, 150]
    assert hits["/uds-lo-ka/ping"] == 300 and new["start_offset_s"] > pooled["start_offset_s"]


def test_a_replay_plan_and_its_load_json(openloop, tmp_path, local_catalogue):
    """make load TRAFFIC=: plan.py's schedule of a log (testdata/traffic's
    combined.log: 8 GETs and HEADs over about 11 s, the shortest replay: 10 blocks; as logged, 7: its
    404 is left out), sent by openloop as logged to every path of a stream: the server gets each
    logged path once per path, load.json has the schema's shape with each
    route's figures."""
    from traffic_testkit import COMBINED
    catalogue, hits = local_catalogue
    path, doc = write_plan(tmp_path, CATALOGUE=catalogue, TRAFFIC=COMBINED, TRAFFIC_SEND="logged",
                           PATHS="tcp,uds", WARMUP=0, IDLE=0, BLOCK=1, INTERLEAVE=10)
    assert doc["settings"]["traffic"]["routes"][:2] == ["/users/{id}", "/static/app.js"]
    rc, out = run(openloop, path)
    assert rc == 0, out
    load = json.loads((tmp_path / "k1" / "load.json").read_text())
    jsonschema.validate(load, SCHEMA)
    (ph,) = load["phases"]
    assert {p: v["requests"] for p, v in ph["by_path"].items()} == {"tcp": 7, "uds": 7}
    assert {hits[f"/{p}/users/42"] for p in ("tcp", "uds")} == {2} and hits["/uds/static/app.js"] == 1
    users = ph["by_route"][0]
    assert users["route"] == "/users/{id}" and {p: v["requests"] for p, v in users["by_path"].items()} == {"tcp": 3,
                                                                                                            "uds": 3}
    # Its cycles are due at 0, 0.667 and 10 s, each path 1/3 s apart in the
    # first two (13:55:36's three lines spread over the 2 s to the next time),
    # 1/4 s in the last: blocks 0 and 0, 0 and 1, 10 and 10, over both paths.
    n = [sum(x) for x in zip(*(v["blocks"]["n"] for v in users["by_path"].values()))]
    assert n == [3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
