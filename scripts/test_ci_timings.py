"""scripts/ci_timings.py on logs written by the real scripts/step.sh, and on
go test's and the build scripts' lines as they print them."""
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ci_timings  # noqa: E402


def stamped(tmp_path, script):
    """The log of `step.sh outer bash -c SCRIPT` (SCRIPT may call step.sh itself), stdout and stderr together."""
    log = tmp_path / "ci.log"
    with open(log, "w") as f:
        rc = subprocess.run([str(HERE / "step.sh"), "outer", "bash", "-c", script], stdout=f, stderr=subprocess.STDOUT,
                            env={"PATH": f"{HERE}:/usr/bin:/bin"}).returncode
    return rc, log


def rows(log):
    with open(log) as f:
        return [(r.name, r.depth, r.secs, r.result, r.built) for r in ci_timings.parse(f)]


def test_nested_steps_their_times_results_and_what_each_built(tmp_path):
    rc, log = stamped(tmp_path, """
        step.sh deps bash -c 'echo "[deps 10:00:00] building promtool from github.com/prometheus/prometheus@v0.305.1 (cached at x)" >&2'
        step.sh unit bash -c 'echo "ok  	uds-lab/app	19.386s"; echo "FAIL	uds-lab/floor	1.500s"; sleep 1.1; exit 3' || true
        echo "[standins 10:01:00] building uds-lab-standin/nginx:1.22" >&2
    """)
    assert rc == 0
    got = rows(log)
    assert [(n, d, res) for n, d, _, res, _ in got] == [
        ("outer", 0, "ok"), ("deps", 1, "ok"), ("unit", 1, "exit 3"),
        ("uds-lab/app", 2, "ok"), ("uds-lab/floor", 2, "fail")]
    outer, deps, unit, app, _ = got
    assert deps[4] == ["promtool"] and unit[4] == []
    assert outer[4] == ["promtool", "uds-lab-standin/nginx:1.22"]  # the outer step built what its steps built
    assert unit[2] >= 1 and outer[2] >= unit[2] and app[2] == pytest.approx(19.386)


def test_go_tests_and_their_first_subtests_in_the_step_they_ran_in(tmp_path):
    log = tmp_path / "ci.log"
    log.write_text("\n".join([
        "[step make e2e] start 2026-11-27T07:47:01Z",
        "=== RUN   TestLab",
        "--- PASS: TestLab (1448.14s)",
        "    --- PASS: TestLab/second_door (0.47s)",
        "        --- PASS: TestLab/load/requests (0.00s)",
        "    --- FAIL: TestLab/max (188.32s)",
        "--- SKIP: TestPrivateRoot (0.00s)",
        "[step make e2e] end 2026-11-27T08:18:25Z 1884s exit 1",
    ]))
    assert [(n, d, s, res) for n, d, s, res, _ in rows(log)] == [
        ("make e2e", 0, 1884, "exit 1"), ("TestLab", 1, 1448.14, "ok"), ("TestLab/second door", 2, 0.47, "ok"),
        ("TestLab/max", 2, 188.32, "fail"), ("TestPrivateRoot", 1, 0.0, "skip")]


def test_a_step_that_never_ended_is_shown_so(tmp_path):
    log = tmp_path / "ci.log"
    log.write_text("[step make test] start 2026-11-27T07:40:18Z\n[step pytest] start 2026-11-27T07:41:00Z\n")
    out = ci_timings.table(ci_timings.parse(open(log)))
    assert "| make test | (no end) |  | cached |" in out
    assert "| &nbsp;&nbsp;&nbsp;&nbsp;pytest | (no end) |" in out


def test_the_table_in_minutes_and_the_exit_codes(tmp_path, capsys):
    rc, log = stamped(tmp_path, "true")
    assert ci_timings.main(["ci_timings.py", str(log)]) == 0
    assert "| outer | 0:00 | ok | cached |" in capsys.readouterr().out
    empty = tmp_path / "empty.log"
    empty.write_text("nothing stamped\n")
    assert ci_timings.main(["ci_timings.py", str(empty)]) == 1
    assert ci_timings.main(["ci_timings.py", str(tmp_path / "missing.log")]) == 2
    assert ci_timings.main(["ci_timings.py"]) == 2
