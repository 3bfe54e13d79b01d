"""uds-lab report: one run's figures per path, from the load generator's own statistics and
from Prometheus, compared with tcp round by round.

The command line: reads the run's load.json (which must match
loadgen/load.schema.json) and compose.json, queries Prometheus, writes
report.md, report.json and the charts.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import jsonschema

from report import floor as floor_report
from report import machine_state
from report import sweep as sweep_report
from report import sweep_render
from report.charts import write_charts
from report.context import build_report, compose_info
from report.lab import margin_pct as read_margin
from report.queries import phase_figures_with, server_cores
from report.markdown import render_markdown
from report.prometheus import prometheus_client
from report.selection import matchers, selecting
from report.values import ReportError, number, scalar
from report.warnings import warning

# The shape of load.json that the generators write (loadgen/openloop, loadgen/load.js for k6, the wrk and oha runners).
LOAD_SCHEMA = Path(__file__).resolve().parent.parent / "loadgen" / "load.schema.json"


def read_json(path, required=True):
    p = Path(path)
    if not p.is_file():
        if required:
            raise ReportError(f"{p} not found (run `make load` first, or pass --run <testid>)")
        return None
    try:
        # NaN and Infinity are not JSON; Python reads them as floats, which
        # would reach the statistics. Kept as text, the schema refuses them
        # where they stand ("at phases/0/by_path/uds/blocks/3/p50").
        return json.loads(p.read_text(), parse_constant=lambda c: f"{c} (not a number JSON allows)")
    except ValueError as e:
        raise ReportError(f"{p} is not valid JSON: {e}") from e


def read_load(path, schema_path=LOAD_SCHEMA):
    """load.json, refused with where and why when it does not match the schema:
    a report from a file of another shape would be wrong without saying so."""
    load = read_json(path)
    if not Path(schema_path).is_file():
        raise ReportError(f"{schema_path} not found: the report reads load.json against it")
    schema = read_json(schema_path)
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(load))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise ReportError(f"{path} does not match {Path(schema_path).name} (written by another version of the "
                          f"load generator?): at {where}: {error.message}")
    return load


def runs_with_load(results_dir):
    """The runs under results_dir that have a load.json (or a floor.json), newest name last."""
    return sorted({p.parent.name for n in ("load.json", "floor.json") for p in Path(results_dir).glob(f"*/{n}")})


def run_floor(run_dir):
    """A make floor run's report: the transports alone, no Prometheus needed."""
    rep = floor_report.build(floor_report.read_floor(run_dir / "floor.json"),
                             read_json(run_dir / "compose.json", required=False))
    rep["machine_state"] = machine_state.read(run_dir)
    (run_dir / "report.json").write_text(json.dumps(rep, indent=1, ensure_ascii=False) + "\n")
    (run_dir / "report.md").write_text(floor_report.render(rep))
    return {**rep, "charts": [], "warnings": []}


def run_sweep(run_dir, load, prometheus_url, query=None, rate=None):
    """A make sweep run's report: the generator's own figures per step and path, and the
    server's per phase where Prometheus answers (said where it does not)."""
    gen = load["settings"]["generator"]
    comp = compose_info(read_json(run_dir / "compose.json", required=False), gen)
    server, missing, backlog = {}, None, None
    try:
        query = query or prometheus_client(prometheus_url)
        server = {p["name"]: p["figures"] for p in phase_figures_with(load, query, None, server_cores(comp["limits"]))}
        # The backlog the app last exported before the sweep began: make sweep SWEEP=envelope restarts it at
        # APP_SOMAXCONN, so the hour's largest would be the lab's usual one, not the sweep's.
        n = scalar(query, f"max(last_over_time(app_listen_backlog[1h] @ {load['start_ms'] / 1000:.3f}))") \
            if load.get("start_ms") else None
        backlog = (f"{n:,.0f} on both listeners (net.core.somaxconn in the app's network namespace, which Go's "
                   "net.Listen asks for)") if n else "not exported by this app (app_listen_backlog)"
    except ReportError as e:
        missing = str(e)
    rep = sweep_report.build(load, server, number(comp["limits"][gen]["cpus"]), missing, backlog)
    rep["machine_state"] = machine_state.read(run_dir)
    rep["charts"] = sweep_render.write_chart(rep, run_dir)
    (run_dir / "report.json").write_text(json.dumps(rep, indent=1, ensure_ascii=False) + "\n")
    (run_dir / "report.md").write_text(sweep_render.render(rep, rate))
    return rep


def run(run_id, prometheus_url, results_dir, query=None, rate=None, margin_pct=None, select=""):
    """Reads the inputs, builds the report, writes report.md, report.json and charts; returns the report.
    margin_pct: MARGIN (None: .env's default); select: label matchers added to every series selector of
    every query (a shared Prometheus: report/selection.py)."""
    select = matchers(select)
    if query is None and select:
        query = selecting(prometheus_client(prometheus_url), select)
    run_dir = Path(results_dir) / run_id
    if not (run_dir / "load.json").is_file() and (run_dir / "floor.json").is_file():
        return run_floor(run_dir)
    if not (run_dir / "load.json").is_file():
        have = runs_with_load(results_dir)
        listed = f"the runs there: {', '.join(have[-10:])}" if have else "there are none: run `make load` first"
        raise ReportError(f"{run_dir / 'load.json'} not found: make report RUN=<testid> with a run that finished; "
                          f"{listed}")
    load = read_load(run_dir / "load.json")
    if load["settings"]["mode"] == "sweep":
        return run_sweep(run_dir, load, prometheus_url, query, rate)
    compose = read_json(run_dir / "compose.json", required=False)
    # A Kubernetes run (scripts/k8s.sh): where it ran, in place of compose.json.
    cluster = read_json(run_dir / "cluster.json", required=False)
    query = query or prometheus_client(prometheus_url)
    rep = build_report(load, compose, query, prometheus_url, read_margin() if margin_pct is None else margin_pct,
                       cluster)
    rep["cluster"], rep["segments"] = cluster, load.get("segments")
    rep["machine_state"] = machine_state.read(run_dir)
    rep["prometheus_select"] = select or None
    floor = floor_report.newest(results_dir)
    rep["floor"] = floor_report.beside_paths(floor and floor_report.build(floor), rep["workloads"], rep["phases"],
                                             rep["settings"])
    if compose is None and cluster is None:
        rep["warnings"].insert(0, warning("no_compose", f"{run_dir / 'compose.json'} not found: images and limits unknown", []))
    rep["charts"] = write_charts(rep, run_dir)
    (run_dir / "report.json").write_text(json.dumps(rep, indent=1, ensure_ascii=False) + "\n")
    (run_dir / "report.md").write_text(render_markdown(rep))
    return rep


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="the run's testid: results/<run>/load.json")
    ap.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus base URL")
    ap.add_argument("--results", default="results", help="folder holding <run>/")
    ap.add_argument("--rate", default="", help="a sweep run: your rate (req/s), to name the nearest measured step")
    ap.add_argument("--select", default="", help='label matchers added to every series selector, on a Prometheus that '
                    'scrapes more than this lab (make k8s-report K8S_PROMETHEUS=...: namespace="<ns>",uds_lab_release="<release>")')
    args = ap.parse_args(argv)
    if args.rate and not (args.rate.isdigit() and int(args.rate) >= 1):
        print(f'report: RATE="{args.rate}": must be a whole number >= 1 (req/s)', file=sys.stderr)
        return 2
    if not args.run or "/" in args.run or args.run in (".", ".."):
        print(f"report: --run {args.run!r}: give a testid (a folder name under {args.results})", file=sys.stderr)
        return 2
    try:
        margin = read_margin(os.environ.get("MARGIN"))
        rep = run(args.run, args.prometheus, args.results, rate=int(args.rate) if args.rate else None, margin_pct=margin,
                  select=args.select)
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    out = Path(args.results) / args.run
    print(f"wrote {out / 'report.md'}, {out / 'report.json'} and {len(rep['charts'])} chart(s)")
    for wn in rep["warnings"]:
        print(f"warning: {wn['kind']}: {wn['message']}")
    return 0
