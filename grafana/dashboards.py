#!/usr/bin/env python3
"""Writes grafana/dashboards/*.json: classic Grafana dashboard JSON (Grafana 13
file provisioning rejects the v2 schema), built from a few panel helpers
instead of hand-copied panel blocks: panels.py (the helpers), one module per
dashboard (paths_dashboard.py with paths_queries.py, load_dashboard.py,
host_dashboard.py).

    make dashboards                                       # write the files
    PYTHONPATH=. python3 grafana/dashboards.py --check    # fail if they are not up to date

It imports the report package (the repository's root on PYTHONPATH, as make
sets it): the catalogue, the path colours and the PromQL selectors are the
report's too.
"""
import json
import sys
from pathlib import Path

from host_dashboard import host_dashboard
from load_dashboard import load_dashboard
from paths_dashboard import paths_dashboard

OUT = Path(__file__).resolve().parent / "dashboards"


DASHBOARDS = {"paths.json": paths_dashboard, "load.json": load_dashboard, "host.json": host_dashboard}


def render(build):
    return json.dumps(build(), indent=2) + "\n"


def main(argv):
    check = "--check" in argv
    stale = []
    for name, build in DASHBOARDS.items():
        path, want = OUT / name, render(build)
        if check:
            if not path.exists() or path.read_text() != want:
                stale.append(str(path))
        else:
            OUT.mkdir(exist_ok=True)
            path.write_text(want)
    if stale:
        print("out of date (run: make dashboards):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
