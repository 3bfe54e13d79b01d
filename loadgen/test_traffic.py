"""loadgen/traffic.py on hand-written logs whose every figure is known
(testdata/traffic/: combined.log, its gzip under a plain name, json-msec.log;
the figures are worked out in the comments), on generated logs (the sample's
size and repeatability, bad-share bounds), and on a log full of planted
secrets that must appear nowhere in what the module returns or prints."""
import gzip
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import apachelogs
import pytest

import accesslog
import traffic

DATA = Path(__file__).resolve().parent / "testdata" / "traffic"
COMBINED = DATA / "combined.log"
COMBINED_GZ = DATA / "combined-gz.log"   # gzip of combined.log under a plain name
JSON_MSEC = DATA / "json-msec.log"
T0_COMBINED = 1696946136.0   # 10/Oct/2023:13:55:36 +0000
T0_JSON = 1700000000.0


def settings(**env):
    return traffic.read_settings({"SEED": "1", **env})


def summary(*files, **env):
    return traffic.summarise([str(f) for f in files], settings(**env))


def requests(*files, **env):
    return list(traffic.read([str(f) for f in files], settings(**env), []))


def error(*files, **env):
    with pytest.raises(traffic.TrafficError) as e:
        summary(*files, **env)
    return str(e.value)


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


# --- bad input ---

def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = '192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 1 "-" "curl"\n'


@pytest.mark.parametrize("line,field", [
    ('192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 1 "-" "cu', "user agent"),   # truncated
    ('192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 12', "bytes"),
    ('192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" abc 1 "-" "curl"', "status"),
    ('192.0.2.1 - - [10/Foo/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 1 "-" "curl"', "time"),
    ('192.0.2.1 - - [31/Feb/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 1 "-" "curl"', "time"),
    ('192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] GET /a HTTP/1.1 200 1 "-" "curl"', "request"),
    ('192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 1 - "curl"', "referrer"),
])
def test_bad_combined_line_named_by_number_and_field(tmp_path, line, field):
    log = write(tmp_path, "bad.log", GOOD * 3 + line + "\n" + GOOD)
    msg = error(log)
    assert msg.startswith(f"{log}: 1 of 5 lines (20%) do not parse as nginx's combined log_format, over "
                          f"TRAFFIC_MAX_BAD=1%: first line 4 ({field}: ")


@pytest.mark.parametrize("line,field", [
    ('{"msec":"1700000000.000","request":"GET / HTTP/1.1","status":"200"', "json"),          # truncated
    ('["not", "an object"]', "json"),
    ('{"request":"GET / HTTP/1.1","status":"200","body_bytes_sent":"1"}', "time"),
    ('{"msec":"1700000000123","request":"GET / HTTP/1.1","status":"200","body_bytes_sent":"1"}', "time"),
    ('{"time_iso8601":"2023-11-14T22:13:20","request":"GET / HTTP/1.1","status":"200","body_bytes_sent":"1"}',
     "time"),
    ('{"msec":"1700000000.000","request":"GET / HTTP/1.1","status":"OK","body_bytes_sent":"1"}', "status"),
    ('{"msec":"1700000000.000","request":"GET / HTTP/1.1","status":"200"}', "bytes"),
    ('{"msec":"1700000000.000","request":"GET / HTTP/1.1","status":"200","body_bytes_sent":"1",'
     '"request_time":"-0.1"}', "request_time"),
    ('{"msec":"1700000000.000","status":"200","body_bytes_sent":"1"}', "method"),
])
def test_bad_json_line_named_by_number_and_field(tmp_path, line, field):
    good = '{"msec":"1700000000.000","request":"GET / HTTP/1.1","status":"200","body_bytes_sent":"1"}\n'
    log = write(tmp_path, "bad.log", good + line + "\n")
    msg = error(log)
    assert msg.startswith(f"{log}: 1 of 2 lines (50%) do not parse as JSON lines (log_format ... escape=json), "
                          f"over TRAFFIC_MAX_BAD=1%: first line 2 ({field}: ")


def test_missing_json_field_names_its_setting(tmp_path):
    log = write(tmp_path, "nofield.log", '{"request":"GET / HTTP/1.1","status":"200","body_bytes_sent":"1"}\n')
    assert error(log) == (f"{log}: no line parses as JSON lines (log_format ... escape=json): line 1 (time: no "
                          f"field msec or time_iso8601 or time_local or time or timestamp or @timestamp "
                          f"(TRAFFIC_TIME_FIELD))")


def test_bad_share_within_the_bound_is_counted(tmp_path):
    bad = '192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 1\n'
    log = write(tmp_path, "some.log", GOOD * 199 + bad)      # 0.5%: counted, not fatal
    s = summary(log)
    assert s["files"][0]["unparsable"] == 1 and s["files"][0]["first_unparsable"] == [(200, "bytes: not as nginx's "
                                                                                            "combined log_format writes it")]
    assert s["requests"] == 199
    log = write(tmp_path, "many.log", (GOOD * 30 + bad) * 3 + bad * 4)   # 7 of 97
    msg = error(log)
    assert "7 of 97 lines (7.2%)" in msg and "first line 31 (bytes" in msg and "line 93 (bytes" in msg
    assert "line 95 (bytes" in msg and "line 96" not in msg   # the first five only: 31 62 93 94 95
    assert summary(log, TRAFFIC_MAX_BAD="10")["requests"] == 90


def test_empty_unreadable_and_corrupt_files(tmp_path):
    assert error(write(tmp_path, "empty.log", "")) == f"{tmp_path / 'empty.log'}: empty: no log line"
    assert error(write(tmp_path, "blank.log", "\n \n")) == f"{tmp_path / 'blank.log'}: empty: no log line"
    assert error(tmp_path / "nope.log") == f"{tmp_path / 'nope.log'}: cannot read: No such file or directory"
    corrupt = tmp_path / "corrupt.log"
    corrupt.write_bytes(b"\x1f\x8bnot gzip at all")
    assert error(corrupt) == f"{corrupt}: gzip data corrupt or truncated after line 0"
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(COMBINED.read_bytes() * 50)[:300])
    assert error(cut).startswith(f"{cut}: gzip data corrupt or truncated after line ")
    assert error(COMBINED, cut).startswith(f"{cut}: ")   # the second file is named


@pytest.mark.parametrize("env,name", [
    ({"TRAFFIC_FORMAT": "xml"}, "TRAFFIC_FORMAT"), ({"TRAFFIC_QUERY": "yes"}, "TRAFFIC_QUERY"),
    ({"TRAFFIC_SAMPLE": "0"}, "TRAFFIC_SAMPLE"), ({"TRAFFIC_SAMPLE": "1.5"}, "TRAFFIC_SAMPLE"),
    ({"TRAFFIC_SAMPLE": "nan"}, "TRAFFIC_SAMPLE"), ({"TRAFFIC_SAMPLE": "a"}, "TRAFFIC_SAMPLE"),
    ({"TRAFFIC_FOR": "0"}, "TRAFFIC_FOR"), ({"TRAFFIC_FOR": "-1"}, "TRAFFIC_FOR"), ({"TRAFFIC_FOR": "1d"}, "TRAFFIC_FOR"),
    ({"TRAFFIC_FROM": "yesterday"}, "TRAFFIC_FROM"), ({"TRAFFIC_FROM": "2023-10-10T13:55:46"}, "TRAFFIC_FROM"),
    ({"SEED": "-1"}, "SEED"), ({"TRAFFIC_MAX_BAD": "101"}, "TRAFFIC_MAX_BAD"),
    ({"TRAFFIC_TIME_FIELD": " , "}, "TRAFFIC_TIME_FIELD"),
])
def test_bad_setting_named(env, name, capsys):
    with pytest.raises(traffic.TrafficError, match=f"^{name}="):
        traffic.read_settings(env)
    assert traffic.main([str(COMBINED)], env) == 2
    assert capsys.readouterr().err.startswith(f"traffic: {name}=")


def test_cli_prints_the_summary(capsys):
    assert traffic.main([str(COMBINED), str(JSON_MSEC)], {"SEED": "3"}) == 0
    out = capsys.readouterr().out
    assert "requests: 19; replayable 15 (GET 13, HEAD 2); skipped, never replayed: POST 2, (no request line) 1, " \
           "DELETE 1" in out
    assert "combined, 1 s time resolution (combined's $time_local: whole seconds)" in out
    assert "json (time=msec" in out and "SEED=3" in out and "routes: 8 " in out
    assert "upstream time (sum over retries and redirects): p50 0.006 s" in out
    assert traffic.main([], {}) == 2


def test_cli_as_a_script():
    script = Path(traffic.__file__)
    ok = subprocess.run([sys.executable, str(script), str(COMBINED_GZ)], capture_output=True, text=True,
                        env={"SEED": "1"}, timeout=60)
    assert ok.returncode == 0 and "requests: 11; replayable 8 (GET 7, HEAD 1)" in ok.stdout and ok.stderr == ""


# --- privacy ---

SECRETS = ["SECRETADDR", "SECRETUSER", "SECRETREF", "SECRETAGENT", "SECRETQUERY", "SECRETXFF", "SECRETCOOKIE",
           "SECRETFIELD"]


def planted(tmp_path):
    combined = "".join(
        f'10.0.0.{i}SECRETADDR - SECRETUSER{i} [10/Oct/2023:13:55:{30 + i} +0000] '
        f'"GET /p/{i}?token=SECRETQUERY{i} HTTP/1.1" 200 {i} "https://SECRETREF.example/?q=SECRETQUERY" '
        f'"Mozilla SECRETAGENT{i}" "SECRETXFF"\n' for i in range(5))
    jsonl = "".join(json.dumps({"msec": f"{T0_JSON + i}", "remote_addr": "SECRETADDR", "remote_user": "SECRETUSER",
                                "request": f"GET /j/{i}?session=SECRETQUERY HTTP/1.1", "status": "200",
                                "body_bytes_sent": "5", "http_referer": "SECRETREF", "http_user_agent": "SECRETAGENT",
                                "http_cookie": "SECRETCOOKIE", "other": "SECRETFIELD"}) + "\n" for i in range(5))
    return write(tmp_path, "secret.log", combined), write(tmp_path, "secret.jsonl", jsonl)


def assert_clean(text):
    for s in SECRETS:
        assert s not in text, s


def test_private_data_stays_private(tmp_path, capsys):
    combined, jsonl = planted(tmp_path)
    tallies = []
    reqs = list(traffic.read([str(combined), str(jsonl)], settings(), tallies))
    assert len(reqs) == 10
    assert_clean(repr(reqs) + repr(tallies))
    s = summary(combined, jsonl)
    assert_clean(repr(s) + traffic.format_summary(s))
    assert traffic.main([str(combined), str(jsonl)], {}) == 0
    out = capsys.readouterr()
    assert_clean(out.out + out.err)
    # Every line bad: the error names lines and fields, not their content.
    bad = write(tmp_path, "bad.log", "".join(
        line.replace(" 200 ", " 2x0 ") for line in combined.read_text().splitlines(keepends=True)))
    badj = write(tmp_path, "bad.jsonl", jsonl.read_text().replace('"200"', '"SECRETFIELD"'))
    trunc = write(tmp_path, "trunc.jsonl", jsonl.read_text()[:-40] + "\n")
    for f in (bad, badj, trunc):
        assert traffic.main([str(f)], {}) == 2
        out = capsys.readouterr()
        assert "line 1 (" in out.err or "line 5 (" in out.err
        assert_clean(out.out + out.err)
    for value in ("SECRETFIELD", "1.0SECRETFIELD"):
        with pytest.raises(accesslog.LineError) as e:
            accesslog.seconds("request_time", value)
        assert_clean(str(e.value) + repr(e.value))
