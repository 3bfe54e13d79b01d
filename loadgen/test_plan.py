"""The plan's PRECISION settings and the later batches of a PRECISION run
(loadgen/plan.py): the run states its least and its most length, a batch
continues the run's order of paths, and the files each batch writes."""
import json
import re
import subprocess
import sys

import pytest

import plan as runplan
import plan_env

CATALOGUE = runplan.read_catalogue({})
# Rounds of one path at a time only (INTERLEAVE=0): what PRECISION lengthens.
BASE = {"TESTID": "p", "PATHS": "tcp-lo,uds-lo,tcp-lo-ka,uds-lo-ka", "ROUNDS": "4", "SEED": "3", "IDLE": "10",
        "WARMUP": "3", "DURATION": "5", "INTERLEAVE": "0"}


@pytest.mark.parametrize("raw, want", [("5", 5.0), ("5%", 5.0), ("0.5%", 0.5), ("", None)])
def test_precision_reads_a_percentage(raw, want):
    s = runplan.read_settings({**BASE, "PRECISION": raw}, CATALOGUE)
    assert s.get("precision") == want
    assert ("max_rounds" in s) == (want is not None)


@pytest.mark.parametrize("env, message", [
    ({"PRECISION": "0"}, 'PRECISION="0": must be a percentage above 0 and below 100, e.g. 5%'),
    ({"PRECISION": "100%"}, 'PRECISION="100%": must be a percentage above 0 and below 100, e.g. 5%'),
    ({"PRECISION": "five"}, 'PRECISION="five": must be a percentage above 0 and below 100, e.g. 5%'),
    ({"PRECISION": "5", "MAX_ROUNDS": "3"}, 'MAX_ROUNDS="3": must be a whole number >= 4'),
    ({"PRECISION": "5", "ROUNDS": "1", "MAX_ROUNDS": "8"}, "PRECISION needs ROUNDS >= 2 (an interval needs two rounds), not 1"),
    ({"FIRST_ROUND": "5"}, "FIRST_ROUND=5: only for a later batch of a PRECISION run"),
])
def test_bad_precision_settings_are_named(env, message):
    with pytest.raises(runplan.SettingError) as e:
        runplan.build({**BASE, **env}, CATALOGUE)
    assert str(e.value) == message


def test_precision_is_refused_where_the_answer_comes_from_the_interleaved_stream():
    with pytest.raises(runplan.SettingError, match="PRECISION: make load's answer comes from its interleaved stream"):
        runplan.read_settings({**BASE, "INTERLEAVE": "60", "PRECISION": "5"}, CATALOGUE)
    assert runplan.read_settings({**BASE, "MODE": "max", "INTERLEAVE": "60", "PRECISION": "5"}, CATALOGUE)["precision"] == 5


def test_max_rounds_defaults_to_four_times_rounds():
    assert runplan.read_settings({**BASE, "PRECISION": "5"}, CATALOGUE)["max_rounds"] == 16


def test_a_precision_run_states_its_least_and_its_most():
    doc = runplan.build({**BASE, "PRECISION": "5", "MAX_ROUNDS": "8"}, CATALOGUE)
    most = runplan.build({**BASE, "ROUNDS": "8"}, CATALOGUE)["length_s"]
    assert doc["describe"].startswith(f"20 phases, about {runplan.clock(doc['length_s'])}: 10 s idle")
    assert doc["describe"].endswith("; then more rounds until the answer's intervals are within +/-5% (PRECISION), "
                                    f"at most 8 rounds in all: about {runplan.clock(most)} at most")


def test_a_later_batch_continues_the_order_without_idle_or_warm_up():
    whole = runplan.build({**BASE, "ROUNDS": "7"}, CATALOGUE)
    batch = runplan.build({**BASE, "PRECISION": "5", "ROUNDS": "3", "FIRST_ROUND": "5"}, CATALOGUE)
    assert batch["idle"] is None and batch["first_round"] == 5
    assert {p["round"] for p in batch["phases"]} == {5, 6, 7}
    # Round for round, the paths run in the order the whole run would have given them.
    assert [p["name"] for p in batch["phases"]] == [p["name"] for p in whole["phases"] if p["round"] >= 5]
    assert batch["phases"][0]["start_offset_s"] == 0
    assert batch["describe"] == f"rounds 5 to 7 for PRECISION=5%: 12 phases, about {runplan.clock(batch['length_s'])}"


def test_a_later_batch_writes_its_own_plan_file(tmp_path):
    env = {**BASE, "RESULTS": str(tmp_path), "PRECISION": "5", "ROUNDS": "2", "FIRST_ROUND": "9"}
    res = subprocess.run([sys.executable, str(runplan.HERE / "plan.py")], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["plan-r9.json"]
    assert json.loads((tmp_path / "p" / "plan-r9.json").read_text())["phases"][0]["round"] == 9
    assert runplan.file_names(1) == ("plan.json", "load.json")
    assert runplan.file_names(9) == ("plan-r9.json", "load-r9.json")


FLOOR = {"TESTID": "f", "MODE": "floor", "SEED": "7", "ROUNDS": "6", "WARMUP": "2", "FLOOR_DURATION": "1"}


def test_the_floor_plan_counterbalances_transports_and_measures_each():
    doc = runplan.floor_build(FLOOR, CATALOGUE)
    s = doc["settings"]
    assert s["transports"] == list(CATALOGUE["floor"]["transports"]) and s["sizes"] == [100, 102400]
    warm = [p for p in doc["phases"] if p["round"] == 0]
    assert [(p["transport"], p["measure"], p["size"], p["duration_s"]) for p in warm] == [
        (t, "rtt", 100, 2) for t in s["transports"]]
    measured = [p for p in doc["phases"] if p["round"] > 0]
    assert len(measured) == 6 * 3 * 3
    firsts = [next(p["transport"] for p in measured if p["round"] == r) for r in range(1, 7)]
    assert sorted(firsts) == sorted(s["transports"] * 2)  # 3 transports (odd): 6 rows, each first twice
    for p in measured:
        assert p["address"] == CATALOGUE["floor"]["transports"][p["transport"]]["address"]
        assert (p["measure"] == "connect") == ("max_ops" in p)
    assert doc["describe"] == ("57 phases, about 1m00s: 3 transports x (2 s warm-up + 6 x (2 round-trip sizes + "
                               "connect) x 1 s), order counterbalanced (SEED=7)")
    assert doc["phases"][0]["progress"] == "phase 1/57 floor__uds__rtt-100__r0 (warm-up): about 1m00s left"


@pytest.mark.parametrize("env, message", [
    ({"FLOOR_SIZES": "100,abc"}, 'FLOOR_SIZES="100,abc": must be a comma list of sizes in bytes, 1 to 16777216'),
    ({"FLOOR_SIZES": "0"}, 'FLOOR_SIZES="0": must be a comma list of sizes in bytes, 1 to 16777216'),
    ({"FLOOR_SIZES": "100,100"}, "FLOOR_SIZES: 100,100 names one twice"),
    ({"FLOOR_TRANSPORTS": "uds,udp"}, 'FLOOR_TRANSPORTS: unknown "udp" (known: uds, loopback, bridge)'),
    ({"ROUNDS": "1"}, 'ROUNDS="1": must be a whole number >= 2'),
    ({"FLOOR_DURATION": "0"}, 'FLOOR_DURATION="0": must be a whole number >= 1'),
])
def test_bad_floor_settings_are_named(env, message):
    with pytest.raises(runplan.SettingError) as e:
        runplan.floor_build({**FLOOR, **env}, CATALOGUE)
    assert str(e.value) == message


def test_plan_py_writes_the_floor_plan(tmp_path):
    res = subprocess.run([sys.executable, str(runplan.HERE / "plan.py")], env={**FLOOR, "RESULTS": str(tmp_path)},
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "f" / "plan.json").read_text())["settings"]["mode"] == "floor"


def test_a_later_batch_may_add_a_single_round():
    """MAX_ROUNDS=3 after 2 rounds leaves room for one: the batch's ROUNDS=1
    is no bad setting (it was refused, and e2e's make max stopped there)."""
    batch = runplan.build({**BASE, "PRECISION": "0.01", "MAX_ROUNDS": "3", "ROUNDS": "1", "FIRST_ROUND": "3"}, CATALOGUE)
    assert {p["round"] for p in batch["phases"]} == {3}


def test_the_direct_paths_need_oha_and_carry_the_apps_socket():
    """catalogue.json's direct paths (no nginx): only oha dials the app's
    socket; a phase of direct-uds says which socket, the URL names the route."""
    env = {**BASE, "MODE": "max", "PATHS": "direct-tcp,direct-uds,uds-lo"}
    for gen in ("k6", "wrk"):
        with pytest.raises(runplan.SettingError) as e:
            runplan.build({**env, "GENERATOR": gen}, CATALOGUE)
        assert str(e.value) == (f"PATHS: direct-tcp, direct-uds needs GENERATOR=oha (no nginx: the app's own socket, "
                                f"which {gen} cannot dial)")
    doc = runplan.build({**env, "GENERATOR": "oha"}, CATALOGUE)
    by_path = {p["path"]: p for p in doc["phases"]}
    assert by_path["direct-uds"]["socket"] == "/sock/app.sock" and by_path["direct-uds"]["url"] == "http://app/ping"
    assert by_path["direct-tcp"]["url"] == "http://127.0.0.1:8080/ping" and "socket" not in by_path["direct-tcp"]
    assert "socket" not in by_path["uds-lo"]
    assert not set(runplan.default_paths(CATALOGUE)) & {"direct-tcp", "direct-uds"}
    with pytest.raises(runplan.SettingError) as e:
        runplan.build({**env, "GENERATOR": "oha", "MODE": "rate"}, CATALOGUE)
    assert str(e.value) == "GENERATOR=oha: runs MODE=max or sweep, not rate (catalogue.json's generators say what each can do)"


def test_every_default_is_envs(monkeypatch, tmp_path):
    """.env is the one place for a setting's default: plan.py names none that
    .env sets (it falls back on .env's, through scripts/dotenv.sh), and with no
    setting given the plan is .env's; where no .env is at hand (a container
    compose did not give the setting), an empty setting is named, not guessed."""
    src = "\n".join(p.read_text() for p in sorted(runplan.HERE.glob("plan*.py")))
    given = {k: v for k, v in runplan.dotenv().items() if v}
    for name, default in re.findall(r'(?:whole|setting|one_of|choices|rising)\(env, "([A-Z_]+)", ([^,)]+)', src):
        assert name not in given or default == "FROM_ENV", f"plan.py has its own default for {name}: {default}"
    s = runplan.read_settings({"TESTID": "d"}, CATALOGUE)
    assert (s["rate"], s["rounds"], s["duration"], s["warmup"], s["interleave"]) == tuple(
        int(given[k]) for k in ("RATE", "ROUNDS", "DURATION", "WARMUP", "INTERLEAVE"))
    monkeypatch.setattr(plan_env, "DOTENV", tmp_path / "none.sh")
    runplan.dotenv.cache_clear()
    try:
        with pytest.raises(runplan.SettingError, match="^SCENARIO: empty, and .env gives no value to fall back on$"):
            runplan.read_settings({"TESTID": "d", "GENERATOR": ""}, CATALOGUE)
    finally:
        runplan.dotenv.cache_clear()


def test_the_one_list_of_generators_is_catalogues():
    """catalogue.json lists the generators and what each can do; load.json's
    shape names the same ones."""
    schema = json.loads(runplan.SCHEMA.read_text())
    enum = schema["$defs"]["settings"]["properties"]["generator"]["enum"]
    assert tuple(enum) == runplan.generators(CATALOGUE)
    for g in runplan.generators(CATALOGUE):
        can = CATALOGUE["generators"][g]
        assert set(can["modes"]) <= set(runplan.MODES) and set(can["sweeps"]) <= set(runplan.SWEEPS), g


def test_a_stream_alone_says_it_has_no_rounds():
    doc = runplan.build({**BASE, "INTERLEAVE": "20", "ROUNDS": "0", "IDLE": "0", "WARMUP": "0"}, CATALOGUE)
    assert {p["round"] for p in doc["phases"]} == {1} and all(p["path"] == "mix" for p in doc["phases"])
    assert "no rounds of one path at a time (ROUNDS=0)" in doc["describe"]
    assert "0 x" not in doc["describe"]


def test_each_connection_handling_gets_a_stream_of_its_own():
    """The pooled paths' stream first, then the new-connection paths': a pooled
    comparison never shares its stream with requests that each open one."""
    doc = runplan.build({**BASE, "PATHS": "tcp,uds,tcp-ka,uds-ka,tcp-lo", "INTERLEAVE": "20", "WARMUP": "2"}, CATALOGUE)
    mixes = [p for p in doc["phases"] if p["path"] == "mix"]
    assert [(p["name"], p.get("stream"), p["paths"]) for p in mixes] == [
        ("ping__mix-pooled__r0", "pooled", ["tcp-ka", "uds-ka"]), ("ping__mix-pooled__r1", "pooled", ["tcp-ka", "uds-ka"]),
        ("ping__mix-new__r0", "new", ["tcp", "uds", "tcp-lo"]), ("ping__mix-new__r1", "new", ["tcp", "uds", "tcp-lo"])]
    assert all(p["urls"].keys() == set(p["paths"]) for p in mixes)
    assert "20 s of the 2 pooled paths interleaved request by request, then the same of the 3 new-connection paths" \
        in doc["describe"]
    # One handling alone: one stream of every path, named as ever.
    one = runplan.build({**BASE, "PATHS": "tcp-lo,uds-lo", "INTERLEAVE": "20", "WARMUP": "0"}, CATALOGUE)
    (mix,) = [p for p in one["phases"] if p["path"] == "mix"]
    assert mix["name"] == "ping__mix__r1" and "stream" not in mix and mix["paths"] == ["tcp-lo", "uds-lo"]
