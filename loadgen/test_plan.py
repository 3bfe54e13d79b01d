"""The plan's PRECISION settings and the later batches of a PRECISION run
(loadgen/plan.py): the run states its least and its most length, a batch
continues the run's order of paths, and the files each batch writes."""
import json
import subprocess
import sys

import pytest

import plan as runplan

CATALOGUE = runplan.read_catalogue({})
BASE = {"TESTID": "p", "PATHS": "tcp-lo,uds-lo,tcp-lo-ka,uds-lo-ka", "ROUNDS": "4", "SEED": "3", "IDLE": "10",
        "WARMUP": "3", "DURATION": "5"}


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
