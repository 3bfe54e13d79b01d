"""loadgen/traffic.py on bad input: a line that does not parse named by its
number and field (combined and JSON lines), a share of bad lines within
TRAFFIC_MAX_BAD counted and over it refused, empty, unreadable and corrupt
files, a bad setting named; and its command line."""
import gzip
import subprocess
import sys
from pathlib import Path

import pytest

import traffic
from traffic_testkit import COMBINED, COMBINED_GZ, GOOD, JSON_MSEC, error, summary, write


# --- bad input ---

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


# --- the command line ---

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
