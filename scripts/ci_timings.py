"""The time each step of a test run took, from its log: `python3
scripts/ci_timings.py CI.LOG` prints a Markdown table (docs/tests.md shows
the latest cold and warm ones).

It reads what the run stamps: scripts/step.sh's start and end of each step
(nested steps indented under the step they ran in), `go test`'s time for
each package (`ok`) and, with -v, for each test and its first level of
subtests (`--- PASS`), and the tools and images the run had to build
(scripts/test-deps.sh's and tests/e2e/standins.sh's log lines): a step that
built nothing found everything cached.
"""
import re
import sys

STEP = re.compile(r"^\[step (?P<name>.+?)\] (?:start \S+|end \S+ (?P<secs>\d+)s exit (?P<rc>\d+))$")
# What a run builds, in scripts/test-deps.sh's and tests/e2e/standins.sh's words.
BUILT = [
    re.compile(r"^\[deps [\d:]+\] building (?P<what>\S+)"),
    re.compile(r"^\[deps [\d:]+\] (?P<what>npm ci in \S+)"),
    re.compile(r"^\[deps [\d:]+\] (?P<what>apt-get install .+)"),
    re.compile(r"^\[deps [\d:]+\] pip install (?P<what>.+?) \(in"),
    re.compile(r"^\[deps [\d:]+\] (?P<what>generating kubeconform's schemas)"),
    re.compile(r"^\[standins [\d:]+\] building (?P<what>\S+)"),
    re.compile(r"^\[standins [\d:]+\] (?P<what>debootstrap) "),
]
GO_TEST = re.compile(r"^(?P<indent> {0,4})--- (?P<result>PASS|FAIL|SKIP): (?P<name>\S+) \((?P<secs>[\d.]+)s\)")
GO_PACKAGE = re.compile(r"^(?P<result>ok|FAIL)\s+(?P<name>\S+)\s+(?P<secs>[\d.]+)s")


class Row:
    def __init__(self, name, depth, kind):
        self.name, self.depth, self.kind = name, depth, kind
        self.secs, self.result, self.built = None, None, []


def parse(lines):
    """The rows of a log, in the order they began (a test's at its end)."""
    rows, open_steps = [], []
    for line in lines:
        line = line.rstrip("\n")
        if m := STEP.match(line):
            if m["secs"] is None:
                row = Row(m["name"], len(open_steps), "step")
                rows.append(row)
                open_steps.append(row)
                continue
            # The end closes the innermost open step of that name (and any
            # opened inside it that never ended).
            for i in range(len(open_steps) - 1, -1, -1):
                if open_steps[i].name == m["name"]:
                    open_steps[i].secs = int(m["secs"])
                    open_steps[i].result = "ok" if m["rc"] == "0" else f"exit {m['rc']}"
                    del open_steps[i:]
                    break
            continue
        for b in BUILT:
            if m := b.match(line):
                for s in open_steps:
                    s.built.append(m["what"])
                break
        else:
            m = GO_TEST.match(line) or GO_PACKAGE.match(line)
            if m:
                sub = len(m.groupdict().get("indent") or "") // 4
                row = Row(m["name"].replace("_", " "), len(open_steps) + sub, "test")
                row.secs = float(m["secs"])
                row.result = {"PASS": "ok", "ok": "ok"}.get(m["result"], m["result"].lower())
                rows.append(row)
    return rows


def clock(secs):
    if secs is None:
        return "(no end)"
    secs = round(secs)
    return f"{secs // 60}:{secs % 60:02d}"


def table(rows):
    out = ["| step | min:s | result | built in this run (else cached) |", "|---|---:|---|---|"]
    for r in rows:
        name = "&nbsp;" * 4 * r.depth + r.name.replace("|", "\\|")
        built = ", ".join(dict.fromkeys(r.built)) if r.kind == "step" else ""
        if r.kind == "step" and not built:
            built = "cached"
        out.append(f"| {name} | {clock(r.secs)} | {r.result or ''} | {built} |")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 2:
        print("usage: ci_timings.py CI.LOG", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8", errors="replace") as f:
            rows = parse(f)
    except OSError as e:
        print(f"ci_timings.py: {e}", file=sys.stderr)
        return 2
    if not rows:
        print(f"ci_timings.py: {argv[1]}: no step stamps (scripts/step.sh) and no go test times in it", file=sys.stderr)
        return 1
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
