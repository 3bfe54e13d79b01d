"""The per-block medians of real make load runs, as report/testdata keeps
them for the calibration of the interleaved verdict (report/test_calibration_lab.py):

    python3 -m report.blocks_data --results results RUN [RUN ...] > report/testdata/<name>.json

Each run's interleaved phase(s): its rate, block length, and every path's
client median per block in µs (null: a block with too few requests), so a
test can resample the lab's own seconds instead of drawing normal noise."""
import argparse
import json
import sys
from pathlib import Path

from report import interleaved


def runs_of(load):
    """One entry per measured interleaved phase of a load.json."""
    out = []
    for ph in load["phases"]:
        if ph.get("path") != interleaved.MIX or ph["round"] == 0:
            continue
        blocks = interleaved.blocks(ph)
        out.append({"testid": load["testid"], "workload": ph["workload"], "rate": load["settings"].get("rate"),
                    "block_s": ph["block_s"],
                    "blocks_us": {p: [None if v is None else round(v * 1e3, 1) for v in vs] for p, vs in blocks.items()}})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--about", default="")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args(argv)
    runs = []
    for r in args.runs:
        runs += runs_of(json.loads((Path(args.results) / r / "load.json").read_text()))
    json.dump({"about": args.about, "runs": runs}, sys.stdout, indent=None, separators=(",", ":"))
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
