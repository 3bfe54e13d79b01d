#!/usr/bin/env python3
"""A mutation check, on demand (not in make test or CI): each one-line
mutation in mutations.toml (a file, the exact text it changes, the text it
puts instead, the test command that must then fail) is applied, its test
command run, and the file put back byte for byte. A mutation the tests do
not catch is a bug they would let through.

    python3 tests/mutations/mutate.py                 every mutation
    python3 tests/mutations/mutate.py --set fresh     one set (issue-44, fresh)
    python3 tests/mutations/mutate.py --only ID ...   these ids (a prefix matches)
    python3 tests/mutations/mutate.py --list          the list, nothing run

It refuses to start when a file it would mutate has changes git does not
have (a file left mutated by a killed run is then seen, and git restores
it), or when a mutation's text is not in its file exactly once (the list is
out of date). Each test command is first run on the unmutated tree and must
pass. Files are restored in a finally (Ctrl-C and SIGTERM included); only
SIGKILL can leave one mutated, which git diff then shows.

Commands run with bash from the repository root, with .venv/bin and
~/.cache/uds-lab/bin first on PATH (python is .venv's, helm and the k8s
tools are scripts/test-deps.sh's), and Python's bytecode kept apart for each
run (PYTHONPYCACHEPREFIX), so that no stale .pyc hides or outlives a mutation.

Exit 0 when every mutation run was caught, 1 when one survived, 2 when it
could not run. Standard library only."""
import argparse
import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LIST = HERE / "mutations.toml"


class Refused(Exception):
    pass


def load(path=LIST):
    """The mutations, each with its test command resolved."""
    doc = tomllib.loads(path.read_text())
    tests = doc.get("tests", {})
    out, seen = [], set()
    for m in doc["mutation"]:
        missing = {"id", "set", "file", "old", "new", "test"} - set(m)
        if missing:
            raise Refused(f"{path.name}: mutation {m.get('id', '?')}: no {', '.join(sorted(missing))}")
        if m["id"] in seen:
            raise Refused(f"{path.name}: {m['id']} twice")
        if m["old"] == m["new"]:
            raise Refused(f"{path.name}: {m['id']}: old and new are the same")
        seen.add(m["id"])
        m["command"] = tests.get(m["test"], m["test"])
        out.append(m)
    return out


def dirty(files):
    """The files among these that differ from git's HEAD (or that git does not track)."""
    res = subprocess.run(["git", "status", "--porcelain", "--", *files], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return sorted({line[3:] for line in res.stdout.splitlines()})


def locate(m):
    """(the file's bytes, the line the mutation is on); refused unless old is there exactly once."""
    path = ROOT / m["file"]
    text = path.read_text()
    n = text.count(m["old"])
    if n != 1:
        raise Refused(f"{m['id']}: its text is in {m['file']} {n} times, not once: the list is out of date "
                      f"({m['old']!r})")
    return path.read_bytes(), text[:text.index(m["old"])].count("\n") + 1


def run(command, timeout):
    """(passed, seconds, output) of a test command; a timeout counts as a failure."""
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{Path.home() / '.cache' / 'uds-lab' / 'bin'}:"
                                 f"{os.environ.get('PATH', '')}", "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory(prefix="mutate-pyc-") as pyc:
        env["PYTHONPYCACHEPREFIX"] = pyc
        t0 = time.monotonic()
        proc = subprocess.Popen(["bash", "-c", command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the test command's own process group
            out, _ = proc.communicate()
            return False, time.monotonic() - t0, out + f"\n(timed out after {timeout} s)"
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return proc.returncode == 0, time.monotonic() - t0, out


def failed_tests(output):
    """The tests a run names as failed (pytest's FAILED lines, go test's --- FAIL lines)."""
    names = re.findall(r"^FAILED (\S+)", output, re.M) + re.findall(r"^\s*--- FAIL: (\S+)", output, re.M)
    if "(timed out after" in output:
        names.append("(timeout)")
    return list(dict.fromkeys(names))


def restore(path, original, mtime):
    path.write_bytes(original)
    os.utime(path, ns=(mtime, mtime))


def on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def arguments(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", help="only the mutations of this set")
    ap.add_argument("--only", nargs="+", default=[], help="only these ids (a prefix matches)")
    ap.add_argument("--list", action="store_true", help="list the mutations and stop")
    ap.add_argument("--timeout", type=int, default=900, help="seconds a test command may take (default 900)")
    ap.add_argument("--verbose", action="store_true", help="print a surviving mutation's test output")
    return ap.parse_args(argv)


def chosen(args):
    """The mutations asked for, each file clean in git (else Refused)."""
    ms = [m for m in load() if (not args.set or m["set"] == args.set)
          and (not args.only or any(m["id"].startswith(o) for o in args.only))]
    if not ms:
        raise Refused("no mutation matches")
    for m in ms:
        locate(m)  # its text once in its file, else Refused
    left = dirty(sorted({m["file"] for m in ms}))
    if left and not args.list:
        raise Refused(f"changes git does not have in {', '.join(left)}: commit or stash them first (or, if a run "
                      "was killed mid-mutation, git checkout -- them)")
    return ms


def unmutated_pass(ms, timeout):
    """Every test command passes on the tree as it is: else a mutation would look caught."""
    for command in dict.fromkeys(m["command"] for m in ms):
        ok, secs, out = run(command, timeout)
        print(f"unmutated: {'pass' if ok else 'FAIL'} ({secs:.0f} s): {command}", flush=True)
        if not ok:
            print(out[-4000:], file=sys.stderr)
            print("mutate.py: a test command fails without any mutation: fix that first", file=sys.stderr)
            return False
    return True


def apply(m, timeout):
    """(caught, line, seconds, the output) of one mutation, its file restored
    byte for byte (None for caught when it did not come back)."""
    path = ROOT / m["file"]
    original, line = locate(m)
    mtime = path.stat().st_mtime_ns
    digest = hashlib.sha256(original).digest()
    try:
        path.write_text(original.decode().replace(m["old"], m["new"], 1))
        passed, secs, out = run(m["command"], timeout)
    finally:
        restore(path, original, mtime)
    if hashlib.sha256(path.read_bytes()).digest() != digest:
        return None, line, secs, out
    return not passed, line, secs, out


def summary(rows):
    """Each set's share caught, and the survivors: the exit code."""
    print()
    for s in dict.fromkeys(m["set"] for m, *_ in rows):
        mine = [r for r in rows if r[0]["set"] == s]
        n = sum(1 for r in mine if r[2])
        print(f"{s}: {n} of {len(mine)} caught ({n / len(mine):.0%})")
    survived = [r[0]["id"] for r in rows if not r[2]]
    if survived:
        print(f"survived: {', '.join(survived)}")
    return 1 if survived else 0


def main(argv=None):
    args = arguments(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        ms = chosen(args)
    except Refused as e:
        print(f"mutate.py: {e}", file=sys.stderr)
        return 2
    if args.list:
        for m in ms:
            print(f"{m['id']:32} {m['set']:9} {m['file']}:{locate(m)[1]}  {m['old'].strip()!r} -> "
                  f"{m['new'].strip()!r}\n{'':43}test: {m['command']}")
        return 0
    if not unmutated_pass(ms, args.timeout):
        return 2
    rows = []
    for m in ms:
        caught, line, secs, out = apply(m, args.timeout)
        if caught is None:
            print(f"mutate.py: {m['file']} did not come back as it was: git diff it", file=sys.stderr)
            return 2
        by = ", ".join(failed_tests(out)) or ("(the command failed)" if caught else "")
        rows.append((m, line, caught, secs, by))
        print(f"{'caught  ' if caught else 'SURVIVED'} {m['id']:32} {m['file']}:{line} ({secs:.0f} s) {by}", flush=True)
        if not caught and args.verbose:
            print(out[-4000:])
    return summary(rows)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("mutate.py: interrupted; every file it mutated is restored", file=sys.stderr)
        sys.exit(130)
