"""The messages of each failed test, at the end of make e2e's output: CI keeps
only the log's tail, where go test -v leaves the verdicts but not the
messages (they are printed as they happen, thousands of lines earlier).

    go tool test2json -t < go-test-v.log | python3 tests/e2e/failures.py
"""
import json
import re
import sys

# A test's own lines (t.Log, t.Error), not the commands' output it streams.
OWN = re.compile(r"^\s+\w+_test\.go:\d+: ")
KEEP = 25  # the last lines of each failed test: its error and what led to it


def main():
    lines, failed, last = {}, [], None
    for raw in sys.stdin:
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        test, out = e.get("Test"), e.get("Output", "")
        # A message of several lines goes on indented deeper than its first.
        if e.get("Action") == "output" and test and (OWN.match(out) or (last == test and out.startswith(" " * 8))):
            lines.setdefault(test, []).append(out.rstrip())
            last = test
        elif e.get("Action") == "output":
            last = None
        elif e.get("Action") == "fail" and test:
            failed.append(test)
    # A parent fails with its subtests: only those whose own lines say why.
    leaves = [t for t in failed if not any(f.startswith(t + "/") for f in failed)]
    for t in leaves:
        print(f"--- why {t} failed (its last {KEEP} lines of its own):")
        print("\n".join(lines.get(t, ["    (no lines of its own)"])[-KEEP:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
