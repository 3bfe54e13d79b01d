"""The logs loadgen/traffic.py's tests read and the calls they make, shared
by test_traffic*.py, test_replay.py and test_openloop.py (not a test module:
pytest collects nothing here): testdata/traffic/'s hand-written logs
(combined.log, its gzip under a plain name, json-msec.log; test_traffic.py
works out their figures), traffic.py called with a fixed SEED, a log written
from text, and a log full of planted secrets."""
import json
from pathlib import Path

import pytest

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


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = '192.0.2.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 1 "-" "curl"\n'


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
