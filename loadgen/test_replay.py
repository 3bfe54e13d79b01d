"""loadgen/replay.py and plan.py's TRAFFIC on the hand-written logs of
testdata/traffic/ (test_traffic.py works out their lines), whose schedules
are known: each cycle's due time, spacing, method, route and target."""
import json
import os
from pathlib import Path

import pytest

import plan as runplan
import replay
import traffic
from traffic_testkit import COMBINED, JSON_MSEC, SECRETS, planted, write


def schedule(path):
    """The schedule's lines as (due_us, spacing_us, method, route, target)."""
    rows = Path(path).read_text().splitlines()
    assert rows[0] == replay.HEADER
    return [(int(d), int(s), m, int(r), t) for d, s, m, r, t in (row.split("\t") for row in rows[1:])]


def build(tmp_path, files, send="emulate", speed=1.0, rate=100, paths=4, **env):
    out = tmp_path / runplan.REPLAY_FILE
    r = replay.replay([str(f) for f in files], traffic.read_settings({"SEED": "1", **env}), send, speed, rate, paths,
                      out)
    return r, schedule(out)


def test_json_log_at_its_own_times(tmp_path):
    r, rows = build(tmp_path, [JSON_MSEC])
    # Arrival = $msec less $request_time: 1700000000.000-0.010 is the first; the
    # POST is never replayed. Emulated: the body's bytes, the upstream times
    # summed ("0.002, 0.004" 6 ms; "0.010 : 0.005" 15 ms; "0.003, -" 3 ms;
    # "-" and "" none), a HEAD's body 0.
    assert [(d, m, t) for d, _, m, _, t in rows] == [
        (0, "GET", "/replay/1000/8000"),
        (240000, "GET", "/replay/2000/6000"),
        (979000, "GET", "/replay/3000/15000"),
        (1009000, "GET", "/replay/4000/0"),
        (1960000, "GET", "/replay/5000/3000"),
        (2911000, "GET", "/replay/6000/6000"),
        (3010000, "HEAD", "/replay/0/0"),
    ]
    # Each cycle's 4 paths spread over the time to the next cycle (the last:
    # the log's 1 ms resolution).
    assert [s for _, s, _, _, _ in rows] == [60000, 184750, 7500, 237750, 237750, 24750, 250]
    assert r["routes"] == ["/api/items/{id}", "/health"] and r["route_counts"] == [5, 2]
    assert [rt for _, _, _, rt, _ in rows] == [0, 0, 0, 1, 0, 0, 1]
    assert r["cycles"] == 7 and r["requests"] == 28 and r["skipped"] == {"POST": 1}
    assert r["no_upstream_time"] == 2 and r["capped"] == 0
    assert r["duration_s"] == pytest.approx(3.011)


def test_combined_ties_spread_over_their_second_and_speed_divides(tmp_path):
    # 13:55:36 holds 3 replayable lines, the next time is 13:55:38 (06:55:38
    # -0700 is the same instant): the three spread over those 2 s.
    _, rows = build(tmp_path, [COMBINED], speed=2.0)
    assert [d for d, *_ in rows[:4]] == [0, 333333, 666667, 1000000]
    _, rows1 = build(tmp_path, [COMBINED], speed=1.0)
    assert [d for d, *_ in rows1][:4] == [0, 666667, 1333333, 2000000]
    assert rows1[-1][0] == 10500000 and rows[-1][0] == 5250000


def test_at_rate_keeps_the_order(tmp_path):
    r, rows = build(tmp_path, [JSON_MSEC], speed=None, rate=200, paths=4)
    assert [d for d, *_ in rows] == [0, 20000, 40000, 60000, 80000, 100000, 120000]
    assert {s for _, s, *_ in rows} == {5000}
    assert r["speed"] == "rate" and r["duration_s"] == pytest.approx(0.14)


def test_logged_sends_paths_as_logged(tmp_path):
    r, rows = build(tmp_path, [COMBINED], send="logged")
    assert [(m, t) for _, _, m, _, t in rows] == [
        ("GET", "/users/42"), ("GET", "/users/7"), ("HEAD", "/static/app.js"),
        ("GET", "/orders/3f2504e0-4f89-11d3-9a0c-0305e82c3301"), ("GET", "/search"),
        ("GET", "/users/42"), ("GET", "/caf%C3%A9")]
    # The log's 404 (/files/a"b.txt) would fail again as logged: left out, counted; the emulation sends it.
    assert r["skipped"] == {"POST": 1, "DELETE": 1, "(no request line)": 1, "GET logged 4xx": 1} and r["cycles"] == 7
    assert oct(os.stat(tmp_path / runplan.REPLAY_FILE).st_mode & 0o777) == "0o600"
    _, kept = build(tmp_path, [COMBINED], send="logged", TRAFFIC_QUERY="keep")
    assert [t for *_, t in kept][1] == "/users/7?tab=orders" and [t for *_, t in kept][4] == "/search?q=a%20b"
    assert "capped" not in r
    assert build(tmp_path, [COMBINED])[0]["cycles"] == 8


def test_top_routes_then_other(tmp_path):
    # 12 routes: /r0 ten times ... the 11th and 12th once each: both are "other".
    lines = [f'192.0.2.1 - - [10/Oct/2023:13:55:{i % 60:02d} +0000] "GET /r{k} HTTP/1.1" 200 1 "-" "-"\n'
             for i, k in enumerate([k for k in range(10) for _ in range(10 - k)] + [10, 11])]
    r, rows = build(tmp_path, [write(tmp_path, "many.log", "".join(lines))])
    assert r["routes"] == [f"/r{k}" for k in range(10)] + ["other"]
    assert r["route_counts"] == [10 - k for k in range(10)] + [2] and r["distinct_routes"] == 12
    assert sum(1 for _, _, _, rt, _ in rows if rt == 10) == 2


def test_caps_are_counted_and_a_head_has_no_body(tmp_path):
    big = json.dumps({"msec": "1700000000.0", "request": "GET /big HTTP/1.1", "status": "200",
                      "body_bytes_sent": str(20 << 20), "upstream_response_time": "12.5"}) + "\n"
    head = json.dumps({"msec": "1700000001.0", "request": "HEAD /big HTTP/1.1", "status": "200",
                       "body_bytes_sent": "500", "upstream_response_time": "0.001"}) + "\n"
    r, rows = build(tmp_path, [write(tmp_path, "big.jsonl", big + head)])
    assert rows[0][4] == f"/replay/{16 << 20}/10000000" and r["capped"] == 1
    assert rows[1][2:] == ("HEAD", 0, "/replay/0/1000")


def test_settings_errors_name_the_setting():
    with pytest.raises(traffic.TrafficError, match='TRAFFIC_SPEED="0"'):
        replay.read_speed({"TRAFFIC_SPEED": "0"})
    with pytest.raises(traffic.TrafficError, match='TRAFFIC_SEND="as-is"'):
        replay.read_send({"TRAFFIC_SEND": "as-is"})
    assert replay.read_speed({}) == 1.0 and replay.read_speed({"TRAFFIC_SPEED": "rate"}) is None


# --- the plan ---

def traffic_plan(tmp_path, **env):
    env = {"TESTID": "t", "SEED": "5", "TRAFFIC": str(COMBINED), "WARMUP": "0", "IDLE": "0", **env}
    return runplan.build(env, runplan.read_catalogue(), tmp_path)


def test_plan_replays_in_each_stream(tmp_path):
    doc = traffic_plan(tmp_path, BLOCK="1")
    s = doc["settings"]
    assert s["workloads"] == ["traffic"] and s["rounds"] == 0
    # 10.75 s of schedule (last cycle at 10.5 s + 4 x 62.5 ms... at 4 paths): 11 blocks of 1 s.
    assert s["interleave"] == 11 and s["traffic"]["cycles"] == 8
    mixes = [p for p in doc["phases"] if p["path"] == runplan.MIX]
    assert len(mixes) == len(runplan.streams(s)) == 2
    for p in mixes:
        assert p["traffic"] == runplan.REPLAY_FILE and p["duration_s"] == 11 and p["endpoint"] == "/replay/:bytes/:us"
        assert all(u.endswith("/" + q) for q, u in p["urls"].items())  # the schedule's target follows
    assert "8 logged requests (6 routes)" in doc["describe"] and "3 not replayed" in doc["describe"]
    # Every cycle once on each path of each stream: 8 x (4 pooled + 4 new), the streams one after the other.
    sizes = [len(paths) for _, paths in runplan.streams(s)]
    assert sizes == [4, 4] and s["traffic"]["requests"] == 64 and s["traffic"]["paths"] == 8
    assert "x 8 paths (streams of 4 then 4) = 64 requests over 11 s a stream" in doc["describe"]


def test_plan_refuses_what_it_cannot_replay(tmp_path):
    with pytest.raises(runplan.SettingError, match="under the 10 blocks"):
        traffic_plan(tmp_path, TRAFFIC_SPEED="2")
    with pytest.raises(runplan.SettingError, match=r"peak is 32 req/s \(4 paths x the log.s peak 8/s\), above the 5 req/s"):
        cat = runplan.read_catalogue()
        cat["generators"]["openloop"]["holds_rps"] = 5
        runplan.build({"TESTID": "t", "SEED": "5", "TRAFFIC": str(COMBINED), "TRAFFIC_SPEED": "rate",
                       "RATE": "1200", "INTERLEAVE": "10"}, cat, tmp_path)
    with pytest.raises(runplan.SettingError, match="INTERLEAVE=0"):
        traffic_plan(tmp_path, INTERLEAVE="0")
    with pytest.raises(runplan.SettingError, match="GENERATOR=k6"):
        traffic_plan(tmp_path, GENERATOR="k6")
    with pytest.raises(runplan.SettingError, match="TRAFFIC: .*nothing to replay"):
        traffic_plan(tmp_path, TRAFFIC_FOR="0.5", TRAFFIC_FROM="3")


def test_the_plan_keeps_no_secret(tmp_path):
    combined, jsonl = planted(tmp_path)
    for send in ("emulate", "logged"):
        doc = traffic_plan(tmp_path / send, TRAFFIC=f"{combined},{jsonl}", TRAFFIC_SEND=send, TRAFFIC_SPEED="0.5")
        text = json.dumps(doc) + (tmp_path / send / runplan.REPLAY_FILE).read_text()
        for s in SECRETS:
            assert s not in text, (send, s)
        assert "/p/{id}" in text  # the folded route, never a client's field


def test_the_run_leaves_no_schedule(tmp_path):
    """drive.py plans the replay (its schedule beside the plan, openloop named
    to send it), and once the generator is done deletes the schedule."""
    from test_drive import drive_here, loop
    seen = []

    def start(service, env):
        assert service == "openloop"
        seen.append((tmp_path / "r1" / runplan.REPLAY_FILE).is_file())
        return 0
    env = {"SEED": "5", "TRAFFIC": str(COMBINED), "TRAFFIC_SEND": "logged", "WARMUP": "0", "IDLE": "0",
           "MODE": "rate", "GENERATOR": "openloop"}
    rc, said, started = loop(tmp_path, "r1", env, start, ask=drive_here)
    assert rc == 0 and seen == [True] and started[0][1]["PLAN_FILE"] == "plan.json"
    assert not (tmp_path / "r1" / runplan.REPLAY_FILE).exists()
    assert json.loads((tmp_path / "r1" / "plan.json").read_text())["settings"]["traffic"]["send"] == "logged"
