"""make compare: each stack's socket gain side by side.

Reads the report.json of one `make load` per stack (loadgen/compare.sh runs
them in turn, same workloads and settings) and writes compare.md and
compare.json: per workload and stack, the client median latency the socket
saved against TCP through the same nginx (over loopback and across the
bridge), with a new connection per request and pooled, round by round with its
95% interval; and where the stack's
own time hides the socket's gain.

    python3 -m report.compare --runs go=<testid>,php-fpm=<testid> --out <folder>
"""
import argparse
import json
import sys
from pathlib import Path

from report import machine_state
from report.breakdown import by_round
from report.lab import TERMS
from report.stats import diff_stats, fmt_interval, has_interval, measurable, no_interval
from report.values import div, generator

# (socket path, TCP path, connection handling, what the TCP path is, term):
# the answer's pairs (catalogue.json's breakdown terms marked answer), each
# through one nginx (make compare is compose's: no stand-in of Kubernetes').
PAIRS = tuple((t["paths"][1], t["paths"][0], t["answer"], t["against"], t["key"]) for t in TERMS
              if t.get("answer") and not t.get("instead_of"))
# A saving below this share of the stack's own median (on the TCP path) is
# real but lost in what the stack itself takes: "hidden".
HIDDEN_SHARE = 0.05


def verdict(d):
    """One pair's saving in words: saves, costs, hidden, no measurable difference."""
    if d is None:
        return "not measured"
    if not has_interval(d):
        return f"{no_interval(d)}: no interval"
    if not measurable(d):
        return "no measurable difference"
    share = div(d["mean"], d["a_mean"])
    if d["mean"] < 0:
        return "the socket costs more"
    if share is not None and share < HIDDEN_SHARE:
        return "hidden by the stack's own time"
    return "the socket saves"


# The verdict of a pooled pair whose paths did not pool (the stack's report
# says why: the stack's stack.env, or the app's accepts): both paths opened
# one per request.
NOT_POOLED = "not pooled: the stack closes every connection"


def gains(rep):
    """{workload: {"uds/tcp-lo": {...}, ...}} of one stack's report.json. A
    pooled pair is not judged where the report found that its paths did not
    pool (its workload's not_pooled)."""
    out = {}
    for w, wl in rep["workloads"].items():
        rounds = by_round(rep["phases"], w)
        for uds, tcp, handling, _, key in PAIRS:
            # The report's own judgment (one place decides: paired in make load's
            # interleaved stream or by rounds, with the report's corrections,
            # Holm's and Benjamini-Hochberg's); the rounds only for a report without it.
            mixed = (((wl.get("breakdown") or {}).get(key) or {}).get("figures") or {}).get("client_p50_ms")
            both = uds in rounds and tcp in rounds
            if not both and mixed is None:
                continue
            if handling == "pooled" and key in (wl.get("not_pooled") or {}):
                out.setdefault(w, {})[f"{uds}/{tcp}"] = {"p50_saved_us": None, "app_cpu_saved_us": None,
                                                       "verdict": NOT_POOLED, "share_of_tcp_median": None}
                continue
            # TCP minus the socket: positive is what the socket saved.
            p50 = mixed or diff_stats(rounds[tcp].get("client_p50_ms", {}), rounds[uds].get("client_p50_ms", {}), 1e3)
            cpu = diff_stats(rounds[tcp].get("app_cpu_us_per_req", {}),
                             rounds[uds].get("app_cpu_us_per_req", {})) if both else None
            out.setdefault(w, {})[f"{uds}/{tcp}"] = {
                "p50_saved_us": p50, "app_cpu_saved_us": cpu, "verdict": verdict(p50),
                "share_of_tcp_median": div(p50["mean"], p50["a_mean"]) if p50 else None}
    return out


def absent(pair, settings):
    """Why a pair has no figure in a stack's run: the paths PATHS left out."""
    ran = (settings or {}).get("paths") or []
    gone = [p for p in pair.split("/") if p not in ran]
    return f"{' and '.join(gone)} not in PATHS" if gone else "no phases in the run"


def cell(g, why="not measured"):
    if g is None:
        return f"not measured ({why})" if why != "not measured" else why
    d, v = g["p50_saved_us"], g["verdict"]
    if d is None:
        return v
    if not has_interval(d):
        return f"{no_interval(d)}: {d['mean']:,.0f} µs, no interval"
    rng = fmt_interval(d, "µs", 0)
    if v == "no measurable difference":
        return f"{v} ({rng})"
    share = f", {g['share_of_tcp_median']:.0%}" if g["share_of_tcp_median"] is not None else ""
    return f"{v}: {d['mean']:,.0f} µs ({rng}{share})"


def summary(stack, wl):
    """A sentence per stack and workload: where the socket matters, and where not."""
    said = {k: g["verdict"] for k, g in wl.items()}
    pairs = lambda verdict: ", ".join(k.replace("/", " vs ") for k, v in said.items() if v == verdict)
    costs = f"; it costs more on {pairs('the socket costs more')}" if pairs("the socket costs more") else ""
    if any(v == "the socket saves" for v in said.values()):
        return f"{stack}: the socket's gain stands out of the stack's own time on {pairs('the socket saves')}{costs}."
    if costs:
        return f"{stack}: no gain from the socket{costs}."
    if any(v == "hidden by the stack's own time" for v in said.values()):
        return (f"{stack}: the socket's gain is real but under {HIDDEN_SHARE:.0%} of the stack's own median: "
                "the stack's time hides it.")
    return f"{stack}: no measurable gain from the socket in this run."


def compare(reports):
    """reports: {stack: report.json} -> compare.json's content."""
    stacks = {s: {"testid": r.get("testid"), "settings": r.get("settings"), "warnings": len(r.get("warnings") or []),
                  "generator": generator(r.get("settings") or {}), "workloads": gains(r),
                  "machine_state": r.get("machine_state")} for s, r in reports.items()}
    return {"hidden_share": HIDDEN_SHARE, "pairs": [f"{u}/{t}" for u, t, *_ in PAIRS], "stacks": stacks}


def render(c):
    base_pair = c["pairs"][0]
    lines = ["# Stacks compared: what the socket saves on each", "",
             "Client median latency, TCP minus the socket through the same nginx, paired in time: second by "
             "second in make load's interleaved stream, as each stack's report judged it, or round by round in a "
             "run without one (mean, its 95% interval, and as a share of TCP's median). An interval that includes "
             "zero is no measurable difference; a saving under "
             f"{c['hidden_share']:.0%} of the stack's own median is hidden by the stack's own time.", ""]
    rounds = min((g["p50_saved_us"]["rounds"] for st in c["stacks"].values() for wl in st["workloads"].values()
                  for g in wl.values() if g["p50_saved_us"]), default=0)
    if rounds < 2:
        lines += ["**1 round only**: no interval, no verdict; ROUNDS=2 or more gives one.", ""]
    workloads = sorted({w for s in c["stacks"].values() for w in s["workloads"]})
    heads = [f"{u} vs {t} ({kind}, {hop})" for u, t, kind, hop, _ in PAIRS]
    for w in workloads:
        lines += [f"## `{w}`", "", f"| stack | {base_pair.split('/')[1]}'s median | " + " | ".join(heads) + " |",
                  "| --- | --- |" + " --- |" * len(heads)]
        for s, st in c["stacks"].items():
            wl = st["workloads"].get(w, {})
            base = wl.get(base_pair, {}).get("p50_saved_us")
            median = f"{base['a_mean']:,.0f} µs" if base else f"n/a ({absent(base_pair, st['settings'])})"
            lines.append(f"| {s} | {median} | "
                         + " | ".join(cell(wl.get(p), absent(p, st["settings"])) for p in c["pairs"]) + " |")
        lines += [""] + [f"- {summary(s, st['workloads'][w])}" for s, st in c["stacks"].items() if w in st["workloads"]]
        lines.append("")
    lines += ["## Runs", ""] + [f"- {s}: `results/{st['testid']}/report.md`, load from {st['generator']} "
                                f"({st['warnings']} warnings); {machine_state.line(st.get('machine_state'))}"
                                for s, st in c["stacks"].items()]
    if len({st["generator"] for st in c["stacks"].values()}) > 1:
        lines += ["", "**The stacks' runs had different load generators**: their figures are not comparable."]
    return "\n".join(lines) + "\n"


def parse_runs(text):
    runs = {}
    for item in text.split(","):
        stack, sep, testid = item.partition("=")
        if not sep or not stack or not testid or "/" in testid:
            raise ValueError(f"--runs: {item!r}: want stack=testid")
        runs[stack] = testid
    return runs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="stack=testid,... in the order to show them")
    ap.add_argument("--out", required=True, help="the comparison's folder under --results")
    ap.add_argument("--results", default="results")
    args = ap.parse_args(argv)
    try:
        runs = parse_runs(args.runs)
    except ValueError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    reports = {}
    for stack, testid in runs.items():
        path = Path(args.results) / testid / "report.json"
        try:
            reports[stack] = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            print(f"compare: {stack}: {path}: {e} (make report RUN={testid} writes it)", file=sys.stderr)
            return 2
    c = compare(reports)
    out = Path(args.results) / args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(c, indent=1, ensure_ascii=False) + "\n")
    (out / "compare.md").write_text(render(c))
    print(f"wrote {out / 'compare.md'} and {out / 'compare.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
