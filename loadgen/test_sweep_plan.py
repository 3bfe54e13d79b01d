"""make sweep's plan (loadgen/plan.py, MODE=sweep): the steps' rates, a plan
per step at its rate, the settings it refuses, and the files each step writes."""
import json

import pytest

import plan as runplan

CATALOGUE = runplan.read_catalogue({})
BASE = {"TESTID": "s", "MODE": "sweep", "PATHS": "tcp-lo,uds-lo", "SEED": "3", "IDLE": "10", "WARMUP": "3",
        "DURATION": "5", "ROUNDS": "12", "SWEEP_TO": "1000"}


def test_rates_rise_in_equal_ratios_to_two_significant_digits():
    assert runplan.geometric(100, 1000, 4) == [100, 220, 460, 1000]
    assert runplan.geometric(100, 6000, 6) == [100, 230, 510, 1200, 2600, 6000]
    assert runplan.geometric(10, 14, 5) == [10, 11, 12, 13, 14]  # each above the last
    s = runplan.read_settings({**BASE, "SWEEP_STEPS": "4"}, CATALOGUE)
    assert (s["rates"], s["step"], s["rate"], s["rounds"]) == ([100, 220, 460, 1000], 1, 100, 3)
    assert runplan.read_settings({**BASE, "SWEEP_RATES": "50, 70,900"}, CATALOGUE)["rates"] == [50, 70, 900]


@pytest.mark.parametrize("env, message", [
    ({"SWEEP_TO": ""}, "SWEEP_TO: unset (make sweep measures it with a flat-out probe; or give SWEEP_RATES)"),
    ({"SWEEP_TO": "100"}, "SWEEP_TO=100: must be above SWEEP_FROM=100"),
    ({"SWEEP_TO": "abc"}, 'SWEEP_TO="abc": must be a whole number >= 0'),
    ({"SWEEP_TO": "103", "SWEEP_STEPS": "5"}, "SWEEP_STEPS=5: more steps than whole rates from SWEEP_FROM=100 to SWEEP_TO=103"),
    ({"SWEEP_STEPS": "1"}, 'SWEEP_STEPS="1": must be a whole number >= 2'),
    ({"SWEEP_RATES": "100,100"}, 'SWEEP_RATES="100,100": must be rising whole numbers >= 1 (req/s), e.g. 100,200,400'),
    ({"SWEEP_RATES": "300,200"}, 'SWEEP_RATES="300,200": must be rising whole numbers >= 1 (req/s), e.g. 100,200,400'),
    ({"SWEEP_RATES": "0,5"}, 'SWEEP_RATES="0,5": must be rising whole numbers >= 1 (req/s), e.g. 100,200,400'),
    ({"SWEEP_ROUNDS": "1"}, 'SWEEP_ROUNDS="1": must be a whole number >= 2'),
    ({"SWEEP_STEP": "7"}, "SWEEP_STEP=7: the sweep has 6 steps"),
    ({"SCENARIO": "ping,cpu"}, "SCENARIO=ping,cpu: make sweep takes one workload (a sweep each)"),
    ({"PRECISION": "5"}, "PRECISION: not for make sweep (its steps have SWEEP_ROUNDS rounds each)"),
    ({"GENERATOR": "wrk"}, 'GENERATOR="wrk": a sweep of rates runs openloop or k6 or oha (a fixed rate per step)'),
    ({"GENERATOR": "oha", "MODE": "rate"}, "GENERATOR=oha: runs MODE=max or sweep, not rate (catalogue.json's generators say what each can do)"),
])
def test_bad_sweep_settings_are_named(env, message):
    with pytest.raises(runplan.SettingError) as e:
        runplan.build({**BASE, **env}, CATALOGUE)
    assert str(e.value) == message


def test_the_first_step_has_idle_and_warm_up_a_later_one_neither():
    first = runplan.build({**BASE, "INTERLEAVE": "0"}, CATALOGUE)
    assert first["idle"] == {"start_offset_s": 0, "duration_s": 10}
    assert [p["name"] for p in first["phases"][:3]] == ["ping__tcp-lo__s1__r0", "ping__uds-lo__s1__r0",
                                                        first["phases"][2]["name"]]
    assert {(p["step"], p["rate"]) for p in first["phases"]} == {(1, 100)}
    assert len([p for p in first["phases"] if p["round"] >= 1]) == 2 * 3  # SWEEP_ROUNDS, not ROUNDS
    assert "sweep step 1/6 at 100 req/s" in first["describe"] and "at most" in first["describe"]
    later = runplan.build({**BASE, "INTERLEAVE": "0", "SWEEP_STEP": "3", "PATHS": "uds-lo"}, CATALOGUE)
    assert later["idle"] is None and later["phases"][0]["start_offset_s"] == 0
    assert [(p["name"], p["rate"]) for p in later["phases"]] == [(f"ping__uds-lo__s3__r{r}", 250) for r in (1, 2, 3)]
    # Every round of a step has each path once, in a counterbalanced order.
    assert all(sorted(p["path"] for p in first["phases"] if p["round"] == r) == ["tcp-lo", "uds-lo"] for r in (1, 2, 3))


def test_every_step_of_an_openloop_sweep_of_rates_starts_with_its_interleaved_stream():
    """The savings at a step come from one stream of the step's paths at its
    rate (the first step's warmed up); each path alone after it, for its knee."""
    first = runplan.build({**BASE, "INTERLEAVE": "20"}, CATALOGUE)
    names = [p["name"] for p in first["phases"]]
    assert names[:2] == ["ping__mix__s1__r0", "ping__mix__s1__r1"]
    mix = first["phases"][1]
    assert (mix["path"], mix["paths"], mix["duration_s"], mix["rate"], mix["step"]) == ("mix", ["tcp-lo", "uds-lo"], 20, 100, 1)
    assert sorted(p["path"] for p in first["phases"][2:]) == ["tcp-lo"] * 3 + ["uds-lo"] * 3
    assert "20 s of the 2 paths interleaved" in first["describe"]
    later = runplan.build({**BASE, "INTERLEAVE": "20", "SWEEP_STEP": "3"}, CATALOGUE)
    assert [p["name"] for p in later["phases"]][:1] == ["ping__mix__s3__r1"] and later["phases"][0]["rate"] == 250
    # oha and a sweep of connections drive one URL at a time: no stream.
    for env in ({"GENERATOR": "oha"}, {"SWEEP": "connections", "GENERATOR": "wrk"}):
        assert all(p["path"] != "mix" for p in runplan.build({**BASE, "INTERLEAVE": "20", **env}, CATALOGUE)["phases"])


def test_a_later_step_writes_its_own_plan_file(tmp_path):
    assert runplan.main({**BASE, "RESULTS": str(tmp_path), "SWEEP_STEP": "2"}) == 0
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["plan-s2.json"]
    doc = json.loads((tmp_path / "s" / "plan-s2.json").read_text())
    assert doc["settings"]["step"] == 2
    assert all(u.endswith("/ping") for p in doc["phases"] for u in ([p["url"]] if "url" in p else p["urls"].values()))


def test_oha_may_sweep_rates_too():
    s = runplan.read_settings({**BASE, "GENERATOR": "oha"}, CATALOGUE)
    assert (s["generator"], s["sweep"], s["rate"]) == ("oha", "rate", 100)
