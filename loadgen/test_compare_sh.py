"""make compare's driver (loadgen/compare.sh), with make, compose and docker
played by stand-ins that record their command lines: the order of the runs,
each stack started by name (make up STACK=..., which records it for make
load and make report), the comparison's command, the lab given back to the Go
app, and the refusals."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "loadgen" / "compare.sh"


@pytest.fixture(autouse=True)
def no_results_left():
    """compare.sh logs each stack's start under results/<TESTID>/ of the
    checkout: what a test run leaves there is removed."""
    before = set((ROOT / "results").glob("*")) if (ROOT / "results").is_dir() else set()
    yield
    for p in set((ROOT / "results").glob("*")) - before if (ROOT / "results").is_dir() else ():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def run(tmp_path, env, images=(), failing=""):
    """Runs compare.sh; returns (exit status, stderr, recorded command lines).
    make fails for the target named by failing."""
    calls = tmp_path / "calls"
    calls.write_text("")
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    record = f'echo "$(basename "$0") $*" >> {calls}\n'
    (bin_ / "make").write_text("#!/bin/sh\n" + record + f'[ "$2" != "{failing}" ]\n')
    (bin_ / "compose").write_text("#!/bin/sh\n" + record)
    # docker image inspect succeeds only for the images this machine has.
    (bin_ / "docker").write_text("#!/bin/sh\n" + record + 'if [ "$1 $2" = "image inspect" ]; then\n'
                                 f'  case " {" ".join(images)} " in *" $3 "*) exit 0 ;; *) exit 1 ;; esac\nfi\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    # A stand-in image named in the shell (tests/e2e/standins.sh's STACK_*_IMAGE) is not the test's.
    mine = {k: v for k, v in os.environ.items() if not (k.startswith("STACK_") and k.endswith("_IMAGE"))}
    full_env = {**mine, "PATH": f"{bin_}:{os.environ['PATH']}", "MAKE": str(bin_ / "make"),
                "COMPOSE": str(bin_ / "compose"), **env}
    p = subprocess.run(["bash", str(SCRIPT)], env=full_env, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr, calls.read_text().splitlines()


def test_runs_each_stack_with_its_settings_then_compares(tmp_path):
    rc, err, calls = run(tmp_path, {"STACKS": "go,php-fpm", "TESTID": "c1", "STACK_PHP_FPM_IMAGE": "standin/php:1"},
                         images=["standin/php:1"])
    assert rc == 0, err
    assert calls == [
        "make -s up",
        "make -s load TESTID=c1-go",
        "make -s report RUN=c1-go",
        "make -s up STACK=php-fpm APP_IMAGE=standin/php:1",
        "make -s load TESTID=c1-php-fpm",
        "make -s report RUN=c1-php-fpm",
        f"compose --profile report run --rm --user {os.getuid()}:{os.getgid()} --entrypoint python3 report "
        "-m report.compare --results results --runs go=c1-go,php-fpm=c1-php-fpm --out c1",
        "make -s up",  # back to the lab's app
    ]


def test_without_stacks_every_stack_runs(tmp_path):
    """STACKS unset: the lab's app and every folder of stacks/ with a stack.env."""
    os_stacks = sorted(d.parent.name for d in (ROOT / "stacks").glob("*/stack.env"))
    rc, err, calls = run(tmp_path, {"STACKS": "", "TESTID": "c5"})
    assert rc == 0, err
    assert [c.split()[3].removeprefix("RUN=c5-") for c in calls if c.startswith("make -s report")] == ["go", *os_stacks]
    assert [c for c in calls if c.startswith("make -s up")] == ["make -s up", *(f"make -s up STACK={s}" for s in os_stacks),
                                                                 "make -s up"]


def test_refuses_unknown_stacks_and_bad_testids(tmp_path):
    rc, err, calls = run(tmp_path, {"STACKS": "go,rails", "TESTID": "c3"})
    assert rc == 2 and 'unknown stack "rails"' in err and "php-fpm" in err
    assert calls == []
    rc, err, calls = run(tmp_path, {"STACKS": "go", "TESTID": "a/b"})
    assert rc == 2 and "TESTID=a/b" in err and calls == []


def test_a_failed_load_stops_and_gives_the_lab_back(tmp_path):
    # make load failing (over 1% of requests failed) stops the comparison
    # with its status, and the lab goes back to the Go app.
    rc, err, calls = run(tmp_path, {"STACKS": "go,node", "TESTID": "c4", "STACK_NODE_IMAGE": "n:1"},
                         images=["n:1"], failing="load")
    assert rc != 0
    assert calls[-2:] == ["make -s load TESTID=c4-go", "make -s up"]
    assert not any("report.compare" in c for c in calls)
