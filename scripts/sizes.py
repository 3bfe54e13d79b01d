#!/usr/bin/env python3
"""Modules a reader can hold: no Python module of the lab over MODULE_LINES
lines and no Python function over FUNCTION_LINES (from its def to its last
line, ast's count), but those EXEMPT names with the reason.

    python3 scripts/sizes.py    # each one over, and each stale exemption; exit 1 if any

scripts/test_sizes.py runs the same check in make test. A link (the chart's
files/) is counted once, as the file it points to; hidden folders (.git,
.venv) and results/ are not the lab's code. Standard library only.
"""
import ast
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES = 400
FUNCTION_LINES = 60
SKIP = {"results", "node_modules", "__pycache__"}
# path, or "path function": why it stays over.
EXEMPT = {}


def python_files(root=ROOT):
    """The lab's Python files, relative to root, links left out."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP)
        for name in sorted(files):
            path = Path(folder) / name
            if name.endswith(".py") and not path.is_symlink():
                yield path.relative_to(root).as_posix()


def sizes(source):
    """(the module's lines, [(function, its lines)]) of Python source."""
    functions = [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return len(source.splitlines()), functions


def over(root=ROOT):
    """{"path" or "path function": its lines} for each one over its limit."""
    out = {}
    for rel in python_files(root):
        lines, functions = sizes((root / rel).read_text())
        if lines > MODULE_LINES:
            out[rel] = lines
        for name, n in functions:
            if n > FUNCTION_LINES:
                out[f"{rel} {name}"] = n
    return out


def problems(root=ROOT, exempt=EXEMPT):
    """One line for each module or function over its limit and not exempt,
    and for each exemption no longer over (to be taken out of EXEMPT)."""
    found = over(root)
    out = [f"{key}: {n} lines, over {MODULE_LINES if ' ' not in key else FUNCTION_LINES}: split it by "
           "responsibility (or name it in scripts/sizes.py's EXEMPT with the reason)"
           for key, n in found.items() if key not in exempt]
    out += [f"{key}: exempt in scripts/sizes.py ({why}), but no longer over: take it out of EXEMPT"
            for key, why in exempt.items() if key not in found]
    return out


def main():
    lines = problems()
    for line in lines:
        print(line, file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
