"""loadgen/traffic.py on hand-written logs whose every figure is known
(testdata/traffic/: combined.log, its gzip under a plain name, json-msec.log;
the figures are worked out in the comments), checked against apachelogs and
on fuzzed lines, and its selection: a stretch of the log, and a seeded
sample of a generated one (its size and repeatability). Bad input:
test_traffic_bad_input.py; planted secrets: test_traffic_privacy.py."""
import random
import shutil

import apachelogs
import pytest

import accesslog
import traffic
from traffic_testkit import (
    COMBINED, COMBINED_GZ, GOOD, JSON_MSEC, T0_COMBINED, T0_JSON, error, requests, settings, summary, write)


# --- the known answers ---

def test_combined_summary_knows_every_figure():
    s = summary(COMBINED)
    # 11 lines: GET x7, HEAD, POST, DELETE and one "-" request line (a 400).
    assert s["requests"] == 11
    assert s["replayable"] == {"GET": 7, "HEAD": 1}
    assert s["skipped"] == {"POST": 1, "": 1, "DELETE": 1}
    # /users/42, /users/7 and http://example.org/users/42 fold into /users/{id}; the UUID into /orders/{id}.
    assert s["routes"] == 6
    assert s["top_routes"][0] == ("/users/{id}", 3)
    assert {r for r, _ in s["top_routes"]} == {"/users/{id}", "/static/app.js", "/orders/{id}", "/search",
                                               '/files/a"b.txt', "/caf%C3%A9"}
    # Replayable at +0 +0 +0 +2 (06:55:38 -0700) +2 +5 +10 +10 s: 10 s, 8 over 11 whole seconds, 3 in the first.
    assert s["first_time"] == T0_COMBINED
    assert s["span_s"] == 10
    assert s["mean_rate"] == pytest.approx(8 / 11)
    assert s["peak_rate"] == 3
    assert s["time_resolution_s"] == 1
    # Bytes 0 100 200 300 400 500 600 700: p50 the 4th (300), p90 and p99 the 8th.
    assert s["bytes"] == {"p50": 300, "p90": 700, "p99": 700, "max": 700}
    assert s["request_time_s"] is None and s["upstream_time_s"] is None
    assert s["files"][0]["format"] == "combined" and s["files"][0]["unparsable"] == 0


def test_combined_requests_as_logged():
    reqs = requests(COMBINED)
    assert reqs[0] == accesslog.Request(T0_COMBINED, "GET", "/users/42", 200, 100, None, None)
    assert reqs[4].time == T0_COMBINED + 2                      # -0700 read as its offset
    assert reqs[6] == accesslog.Request(T0_COMBINED + 3, "", "", 400, 0, None, None)    # "-": no request line
    assert reqs[8].path == '/files/a"b.txt'                     # nginx's \x22 undone
    assert reqs[9].path == "/users/42"                          # absolute form: scheme and host dropped
    assert reqs[10].path == "/caf%C3%A9"                        # \xC3\xA9 (UTF-8 é) percent-encoded
    assert [r.path for r in reqs if "?" in r.path] == []


def test_query_kept_only_when_asked():
    kept = [r.path for r in requests(COMBINED, TRAFFIC_QUERY="keep") if "?" in r.path]
    assert kept == ["/users/7?tab=orders", "/search?q=a%20b", "/users/42?x=1"]
    assert summary(COMBINED, TRAFFIC_QUERY="keep")["routes"] == 6   # routes never count the query
    assert [r.path for r in requests(JSON_MSEC, TRAFFIC_QUERY="keep")][2] == "/api/items/3?debug=1"


def test_gzip_told_by_magic_not_name(tmp_path):
    assert requests(COMBINED_GZ) == requests(COMBINED)
    plain = tmp_path / "plain.gz"   # a plain file named .gz is read as plain
    shutil.copy(COMBINED, plain)
    assert requests(plain) == requests(COMBINED)


def test_json_msec_summary_knows_every_figure():
    s = summary(JSON_MSEC)
    assert s["files"][0]["format"] == "json" and s["files"][0]["lines"] == 8   # the blank line is no line
    assert s["files"][0]["fields"] == {"time": "msec", "request": "request", "status": "status",
                                       "bytes": "body_bytes_sent", "request_time": "request_time",
                                       "upstream_time": "upstream_response_time"}
    assert s["requests"] == 8 and s["replayable"] == {"GET": 6, "HEAD": 1} and s["skipped"] == {"POST": 1}
    assert s["routes"] == 2 and s["top_routes"] == [("/api/items/{id}", 5), ("/health", 2)]
    # Replayable at +0 +.25 +.999 +1 +2 +3 +3.001: 3.001 s, 7 over 4 whole seconds, 3 in the first.
    assert s["span_s"] == pytest.approx(3.001)
    assert s["mean_rate"] == 7 / 4 and s["peak_rate"] == 3
    assert s["time_resolution_s"] == 0.001
    # Bytes 0 1000 .. 6000 (7): p50 the 4th, p90 the 7th.
    assert s["bytes"] == {"p50": 3000, "p90": 6000, "p99": 6000, "max": 6000}
    # Request times 0 .001 .01 .02 .03 .05 .1.
    assert s["request_time_count"] == 7
    assert s["request_time_s"] == pytest.approx({"p50": 0.02, "p90": 0.1, "p99": 0.1, "max": 0.1})
    # Upstream sums .008, .002+.004, .010+.005, .003 (+"-"), .001+.002+.003; "-" and "" have none.
    assert s["upstream_time_count"] == 5
    assert s["upstream_time_s"] == pytest.approx({"p50": 0.006, "p90": 0.015, "p99": 0.015, "max": 0.015})


@pytest.mark.parametrize("value,kept", [
    ("0.002", 0.002), ("0.002, 0.004", 0.006), ("0.002 : 0.004", 0.006), ("0.001, 0.002 : 0.003", 0.006),
    ("0.003, -", 0.003), ("-", None), ("", None), (None, None), ("-, -", None), (0.5, 0.5),
])
def test_upstream_time_every_documented_form_summed(value, kept):
    assert accesslog.upstream_seconds(value) == (pytest.approx(kept) if kept is not None else None)


@pytest.mark.parametrize("value", ["abc", "0.002, x", "-1", "1e3", "99999", True, [1]])
def test_upstream_time_bad(value):
    with pytest.raises(accesslog.LineError, match="upstream_time"):
        accesslog.upstream_seconds(value)


def test_json_other_time_and_request_fields(tmp_path):
    # The lab's own lab_json names: uri and bytes_sent; method and time under chosen names.
    log = tmp_path / "lab.log"
    log.write_text(
        '{"time_iso8601":"2023-11-14T22:13:20+00:00","method":"GET","uri":"/bytes/100","status":"200",'
        '"bytes_sent":"300","request_time":"0.001","upstream_response_time":"0.001"}\n'
        '{"time_iso8601":"2023-11-14T23:13:21+01:00","method":"GET","uri":"/a b","status":200,'
        '"bytes_sent":120,"request_time":0.5,"upstream_response_time":""}\n'
        '{"time_local":"14/Nov/2023:22:13:22 +0000","method":"HEAD","uri":"/x","status":"200",'
        '"bytes_sent":"0"}\n')
    reqs = requests(log)
    assert [r.time - T0_JSON for r in reqs] == [0, 1, 2]
    assert reqs[1] == accesslog.Request(T0_JSON + 1, "GET", "/a%20b", 200, 120, 0.5, None)   # $uri is decoded: re-encoded
    assert reqs[2].request_time is None and reqs[2].upstream_time is None
    s = summary(log)
    assert s["files"][0]["fields"]["bytes"] == "bytes_sent" and s["files"][0]["fields"]["path"] == "uri"
    assert s["time_resolution_s"] == 1
    renamed = tmp_path / "renamed.log"
    renamed.write_text('{"ts":1700000000.5,"line":"GET /r?a=1 HTTP/2.0","code":"404","size":"9","rt":"0.2"}\n')
    env = {"TRAFFIC_TIME_FIELD": "ts", "TRAFFIC_REQUEST_FIELD": "line", "TRAFFIC_STATUS_FIELD": "code",
           "TRAFFIC_BYTES_FIELD": "size", "TRAFFIC_REQUEST_TIME_FIELD": "rt"}
    assert requests(renamed, **env) == [accesslog.Request(T0_JSON + 0.5, "GET", "/r", 404, 9, 0.2, None)]


def test_json_empty_request_is_no_request_line(tmp_path):
    log = write(tmp_path, "empty-request.log",
                '{"msec":"1700000000.000","request":"","status":"400","body_bytes_sent":"0"}\n'
                '{"msec":"1700000000.000","request":"GET / HTTP/1.1","status":"200","body_bytes_sent":"1"}\n')
    assert [r.method for r in requests(log)] == ["", "GET"]
    assert summary(log)["skipped"] == {"": 1}


def test_explicit_format():
    assert summary(COMBINED, TRAFFIC_FORMAT="combined")["requests"] == 11
    msg = error(COMBINED, TRAFFIC_FORMAT="json")
    assert msg.startswith(f"{COMBINED}: no line parses as JSON lines") and "line 1 (json:" in msg


def test_agrees_with_apachelogs_on_every_combined_line():
    """apachelogs (Apache's own format rules) as the oracle for time, request line, status and bytes."""
    plain = apachelogs.LogParser(apachelogs.COMBINED)
    xff = apachelogs.LogParser(apachelogs.COMBINED + ' "%{X-Forwarded-For}i"')   # the nginx image's `main`
    ours = requests(COMBINED, TRAFFIC_QUERY="keep")
    theirs = [(xff if line.endswith('"203.0.113.9"') else plain).parse(line)
              for line in COMBINED.read_text().splitlines()]
    assert len(ours) == len(theirs) == 11
    for r, e in zip(ours, theirs):
        assert r.time == e.request_time.timestamp()
        assert r.status == e.final_status and r.bytes == (e.bytes_sent or 0)
        line = e.request_line.encode("latin-1").decode("utf-8", "surrogateescape") if e.request_line else "-"
        assert (r.method, r.path) == accesslog.request_line(line, True)


def test_fuzzed_lines_parse_or_fail_by_field():
    """Sample lines cut, spliced and sprinkled with odd bytes: each gives a Request or a
    LineError naming a field, nothing else."""
    rng = random.Random(0)
    samples = COMBINED.read_text().splitlines() + [x for x in JSON_MSEC.read_text().splitlines() if x]
    odd = ['"', "\\", "\\x", " ", "{", "}", "[", "]", ":", ",", "-", "\x00", "\xff", "é", "\udcff", "?", "%"]
    fields = settings().fields
    outcomes = {"ok": 0, "error": 0}
    for _ in range(600):
        line = rng.choice(samples)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(line) + 1)
            line = rng.choice([line[:i], line[:i] + rng.choice(odd) + line[i:], line[:i] + line[i + 1:]])
        try:
            if line.lstrip().startswith("{"):
                req, _ = accesslog.parse_json(line, fields, False, {})
            else:
                req, _ = accesslog.parse_combined(line, False)
            assert isinstance(req, accesslog.Request) and (req.path == "" or not accesslog.UNSAFE.search(req.path))
            outcomes["ok"] += 1
        except accesslog.LineError as e:
            assert e.field in {"time", "request", "status", "bytes", "referrer", "user agent", "end of line",
                               "json", "method", "path", "request_time", "upstream_time"}
            outcomes["error"] += 1
    assert outcomes["ok"] > 50 and outcomes["error"] > 50


def test_routes_fold_ids_for_counting_only():
    assert traffic.route("/users/42/orders?x=1") == "/users/{id}/orders"
    assert traffic.route("/o/3F2504E0-4F89-11D3-9A0C-0305E82C3301") == "/o/{id}"
    assert traffic.route("/blob/0123456789abcdef0123") == "/blob/{id}"
    assert traffic.route("/deadbeefdeadbeefdead/v2/x1") == "/deadbeefdeadbeefdead/v2/x1"   # no digit: a word
    assert traffic.route("/") == "/"


# --- selection ---

def test_stretch_offset_and_absolute():
    # From +2 s for 3 s: from the first line at +2 up to the first at +5 (not kept).
    reqs = requests(COMBINED, TRAFFIC_FROM="2", TRAFFIC_FOR="3")
    assert [r.time - T0_COMBINED for r in reqs] == [2, 2, 3, 4]
    s = summary(COMBINED, TRAFFIC_FROM="2s", TRAFFIC_FOR="0.05m")
    assert s["requests"] == 4 and s["replayable"] == {"GET": 2} and not s["files"][0]["read_to_end"]
    for at in ("10/Oct/2023:13:55:46 +0000", "2023-10-10T15:55:46+02:00"):
        assert [r.path for r in requests(COMBINED, TRAFFIC_FROM=at)] == ["/users/42", "/caf%C3%A9"]
    assert [r.time - T0_JSON for r in requests(JSON_MSEC, TRAFFIC_FROM="999ms", TRAFFIC_FOR="1")] == \
        pytest.approx([0.999, 1.0, 1.5])


def test_stretch_judges_the_lines_it_read(tmp_path):
    bad = '192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 2x0 1 "-" "curl"\n'
    late = '192.0.2.1 - - [10/Oct/2023:13:56:36 +0000] "GET /b HTTP/1.1" 200 1 "-" "curl"\n'
    log = write(tmp_path, "stopped.log", GOOD * 3 + bad + late * 5)
    assert error(log, TRAFFIC_FOR="10").startswith(f"{log}: 1 of 5 lines (20%) do not parse")


def test_stretch_past_the_end_is_a_clear_error(capsys):
    assert traffic.main([str(COMBINED)], {"TRAFFIC_FROM": "1h"}) == 2
    err = capsys.readouterr().err
    assert "no GET or HEAD request in the selection (TRAFFIC_FROM=1h)" in err


def generated(tmp_path, n=1000):
    log = tmp_path / "big.log"
    log.write_text("".join(f'{{"msec":"{T0_JSON + i / 100:.3f}","request":"GET /item/{i} HTTP/1.1",'
                           f'"status":"200","body_bytes_sent":"{i}"}}\n' for i in range(n)))
    return log


def test_seeded_sample_size_and_repeatability(tmp_path):
    log = generated(tmp_path)
    a = requests(log, TRAFFIC_SAMPLE="0.3", SEED="7")
    # Binomial(1000, 0.3): mean 300, sd 14.5; 5 sd either side.
    assert 228 <= len(a) <= 372
    assert a == requests(log, TRAFFIC_SAMPLE="0.3", SEED="7")
    assert a != requests(log, TRAFFIC_SAMPLE="0.3", SEED="8")
    assert [r.time for r in a] == sorted(r.time for r in a)   # log order kept
    assert len(requests(log, TRAFFIC_SAMPLE="1")) == 1000


def test_seed_drawn_when_unset():
    assert traffic.read_settings({}).seed >= 0
    assert traffic.read_settings({"SEED": "12"}).seed == 12
