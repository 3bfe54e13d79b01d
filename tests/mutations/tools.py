#!/usr/bin/env python3
"""Mutation testing by maintained tools, on demand (make mutate-tools): every
mutant they can make of the lab's instrument, not only the bugs someone
thought of (mutations.toml, make mutate). gremlins mutates the Go modules,
mutmut the report's Python modules; each runs its language's tests against
every mutant and says which survived.

    python3 tests/mutations/tools.py                      the default modules
    python3 tests/mutations/tools.py --go loadgen/openloop --py report/stats.py
    python3 tests/mutations/tools.py --out FILE           survivors, one a line

They run on a detached git worktree of HEAD in a temporary folder (the
committed tree, never the one being edited; commit first), which is removed
afterwards. The summary (a table per module: mutants tested, killed,
survived, not covered by any test, and the share killed) is printed as
markdown for docs/tests.md; each survivor (file:line and kind for Go, the
mutant's name for Python: `mutmut show NAME` in the worktree shows it) goes
to --out.

mutmut maps a mutant to the tests that reach it by module name, so only
modules imported as a package's (report.*) can be run; loadgen's scripts,
imported as top-level modules by its tests, cannot. The tools come from
scripts/test-deps.sh mutation (gremlins built from the Go module proxy,
mutmut in a virtual environment of its own), at .env's versions.

Exit 0 when the tools ran (survivors are findings, not a failure), 2 when
they could not. Standard library only."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GO = ["loadgen/openloop", "contract/checker", "services/prometheus-auth"]
PY = ["report/interleaved.py", "report/stats.py", "report/breakdown.py", "report/warnings.py"]
# The tests mutmut runs (it picks, per mutant, those that reach its function):
# the report's fast ones, the mutation list's. Its simulations (the null
# report, the calibrations) take minutes each, and reach every statistical
# function: with them, one mutant of stats.py took minutes.
PY_TESTS = ["report/test_worked_examples.py", "report/test_interleaved.py", "report/test_answer_holds.py",
            "report/test_precision.py", "report/test_warnings.py", "report/test_sweep.py", "report/test_compare.py"]


class Failed(Exception):
    pass


def sh(args, cwd, progress=False, **kw):
    """args' output; with progress, their output goes to stderr as they run (gremlins', mutmut's mutants)."""
    if progress:
        res = subprocess.run(args, cwd=cwd, stdout=sys.stderr, stderr=sys.stderr, text=True, **kw)
        if res.returncode != 0:
            raise Failed(f"{' '.join(map(str, args))} (in {cwd}): exit {res.returncode} (its output above)")
        return ""
    res = subprocess.run(args, cwd=cwd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        raise Failed(f"{' '.join(map(str, args))} (in {cwd}): exit {res.returncode}\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    return res.stdout


def tools():
    """(gremlins, mutmut): their paths, installed where missing."""
    out = sh(["scripts/test-deps.sh", "mutation"], ROOT).split()
    if len(out) != 2:
        raise Failed(f"scripts/test-deps.sh mutation printed {out}, want the two tools' paths")
    return out


def gremlins(tool, tree, module, workers):
    """One Go module's row and survivors, from gremlins' JSON."""
    report = Path(tree) / ".gremlins.json"
    sh([tool, "unleash", "--workers", str(workers), "--timeout-coefficient", "5", "-o", str(report), "."],
       Path(tree) / module, progress=True)
    doc = json.loads(report.read_text())
    lived = [f"{module}/{f['file_name']}:{m['line']}:{m['column']} {m['type']}"
             for f in doc["files"] for m in f["mutations"] if m["status"] == "LIVED"]
    timed_out = sum(1 for f in doc["files"] for m in f["mutations"] if m["status"] == "TIMED OUT")
    row = {"module": module, "tool": "gremlins", "killed": doc["mutants_killed"] + timed_out,
           "lived": doc["mutants_lived"], "not_covered": doc["mutants_not_covered"]}
    return row, lived


def mutmut(tool, tree, modules, workers):
    """Each Python module's row and survivors, from one mutmut run over them."""
    tracked = sorted({p.split("/")[0] for p in sh(["git", "ls-files"], tree).split()})
    cfg = ["[mutmut]", "source_paths="] + [f"    {m}" for m in modules]
    cfg += ["pytest_add_cli_args_test_selection="] + [f"    {t}" for t in PY_TESTS]
    cfg += ["also_copy="] + [f"    {t}" for t in tracked]
    Path(tree, "setup.cfg").write_text("\n".join(cfg) + "\n")
    sh([tool, "run", "--max-children", str(workers)], tree, progress=True, timeout=4 * 3600)
    results = sh([tool, "results", "--all", "true"], tree)
    status = dict(re.findall(r"^\s*(\S+__mutmut_\d+): (.+)$", results, re.M))
    rows, lived = [], []
    for m in modules:
        name = m[:-3].replace("/", ".")
        mine = {k: v for k, v in status.items() if k.startswith(name + ".x")}
        killed = sum(1 for v in mine.values() if v in ("killed", "timeout"))
        gone = sorted(k for k, v in mine.items() if v == "survived")
        rows.append({"module": m, "tool": "mutmut", "killed": killed, "lived": len(gone),
                     "not_covered": sum(1 for v in mine.values() if v == "no tests")})
        lived += gone
    return rows, lived


def table(rows):
    out = ["| module | tool | mutants tested | killed | survived | not covered | killed of tested |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        n = r["killed"] + r["lived"]
        out.append(f"| `{r['module']}` | {r['tool']} | {n} | {r['killed']} | {r['lived']} | {r['not_covered']} | "
                   f"{r['killed'] / n:.0%} |" if n else f"| `{r['module']}` | {r['tool']} | 0 | 0 | 0 | "
                   f"{r['not_covered']} | n/a |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--go", nargs="*", default=None, help=f"Go modules (default: {' '.join(GO)})")
    ap.add_argument("--py", nargs="*", default=None, help=f"report's Python modules (default: {' '.join(PY)})")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="mutants tested at once")
    ap.add_argument("--out", help="write each survivor here, one a line")
    ap.add_argument("--keep", action="store_true", help="leave the worktree (to `mutmut show` a survivor)")
    args = ap.parse_args(argv)
    go = GO if args.go is None else args.go
    py = PY if args.py is None else args.py
    for m in py:
        if not m.startswith("report/") or not m.endswith(".py"):
            print(f"tools.py: --py {m}: only report's modules (report/NAME.py) can be mutated by mutmut here",
                  file=sys.stderr)
            return 2
    tree = tempfile.mkdtemp(prefix="uds-lab-mutants-")
    try:
        gr, mm = tools()
        sh(["git", "worktree", "add", "--detach", tree, "HEAD"], ROOT)
        head = sh(["git", "rev-parse", "--short", "HEAD"], ROOT).strip()
        rows, lived = [], []
        for m in go:
            row, gone = gremlins(gr, tree, m, args.workers)
            rows.append(row)
            lived += gone
            print(table([row]).splitlines()[-1], flush=True)
        if py:
            r, gone = mutmut(mm, tree, py, args.workers)
            rows += r
            lived += gone
    except Failed as e:
        print(f"tools.py: {e}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=ROOT, capture_output=True)
            shutil.rmtree(tree, ignore_errors=True)
    print(f"\nAt {head} (gremlins and mutmut, {args.workers} at once):\n\n{table(rows)}")
    if args.keep:
        print(f"\nthe worktree: {tree}")
    if args.out:
        Path(args.out).write_text("".join(f"{s}\n" for s in lived))
    return 0


if __name__ == "__main__":
    sys.exit(main())
