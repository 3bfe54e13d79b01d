"""loadgen/traffic.py on logs full of planted secrets (addresses, users,
referrers, agents, queries, cookies, other fields): none appears in what the
module returns or prints, nor in the errors of lines that do not parse."""
import pytest

import accesslog
import traffic
from traffic_testkit import SECRETS, planted, settings, summary, write


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
