#!/usr/bin/env python3
"""The run's program: `make load`, `make max`, `make sweep`, `make floor` and
`make k8s-load` start it, and it drives the run end to end:

    lab_run.py compose                      a run on Compose (make load, max, sweep, floor)
    lab_run.py k8s up|load|report|cluster ID   the lab on Kubernetes (make k8s-*)

A run is a loop: loadgen/drive.py (the judge, run where numpy and scipy are:
the report's image on Compose, .venv's Python on Kubernetes) plans the next
batch or step and records in results/<id>/drive.json which generator runs
it with which settings, or that the run is done with its exit code; the
backend starts that generator where it runs (compose_backend.py: a
container of compose.yaml's, with its CPU set and network namespace;
k8s_backend.py: the chart's openloop Job, its pods' load.json read from
their logs), waits for it, and the judge is asked again with its exit code.

The host's Python, its standard library alone. Exit codes: the run's (1: a
threshold failed), 2: a bad setting, 130: interrupted (Ctrl-C or SIGTERM:
the generator's container or Job stopped, and what the run left said)."""
import json
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class Stop(Exception):
    """The run stops here: (message or None, exit code)."""


def next_step(run_dir):
    """What drive.py decided last (drive.json's "next")."""
    try:
        return json.loads((run_dir / "drive.json").read_text())["next"]
    except (OSError, ValueError, KeyError) as e:
        raise Stop(f"make: {run_dir}/drive.json holds no next step ({e})", 2)


def drive(backend):
    """The run's loop; its exit code. backend: judge(last_rc) (drive.py's exit
    code), prepare() (once, before the first generator), start(service,
    settings, length_s) (the generator's exit code)."""
    rc, prepared = 0, False
    while True:
        if backend.judge(rc) != 0:
            return 2  # drive.py said why: a bad setting
        nxt = next_step(backend.run_dir)
        if "done" in nxt:
            return nxt["done"]
        if not prepared:
            backend.prepare()
            prepared = True
        rc = backend.start(nxt["run"], nxt["settings"], nxt.get("length_s"))


def interrupted(signum, frame):
    raise KeyboardInterrupt


def run(backend):
    """drive() with the backend's clean-up whatever happens: an interrupt
    (Ctrl-C, or SIGTERM as a killed make sends its group) stops the
    generator and says what the run left."""
    signal.signal(signal.SIGTERM, interrupted)
    try:
        return drive(backend)
    except Stop as e:
        msg, rc = e.args
        if msg:
            print(msg, file=sys.stderr)
        return rc
    except KeyboardInterrupt:
        left = backend.interrupt()
        print(f"\nmake: interrupted: {left}", file=sys.stderr)
        return 130
    finally:
        backend.close()


def main(argv):
    if argv[:1] == ["compose"]:
        import compose_backend
        try:
            backend = compose_backend.Compose.from_env()
        except Stop as e:
            print(e.args[0], file=sys.stderr)
            return e.args[1]
        return run(backend)
    if argv[:1] == ["k8s"]:
        import k8s_backend
        return k8s_backend.main(argv[1:])
    print("usage: lab_run.py compose | k8s up|load|report|cluster ID", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    # The module's own main, so that the backends' Stop (lab_run.Stop, which
    # they import) is the one it catches: run as a script, this file's own
    # classes are __main__'s, another class of the same name.
    import lab_run
    sys.exit(lab_run.main(sys.argv[1:]))
